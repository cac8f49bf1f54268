"""``sign``: the headers a sender attaches, through ``signatures.signing.mac`` as ``verify``
checks them; for ``scrape-pipeline doctor``, the tests and the benchmarks (no Lambda signs)."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from typing import Final

from scrape_pipeline.receiver.signatures.config import Encoding, Scheme, SignatureConfig
from scrape_pipeline.receiver.signatures.signing import (
    GITHUB_PREFIX,
    SW_ID,
    SW_TIMESTAMP,
    check_inputs,
    key,
    mac,
)


def encode(digest: bytes, encoding: Encoding) -> str:
    """A digest as a sender writes it."""
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode("ascii")


def _attach_geonode(c: SignatureConfig, key: bytes, body: bytes, ts: str) -> dict[str, str]:
    stamp = c.timestamp_header
    signed = c.prefix + encode(mac(key, body, stamp and ts, None), c.encoding or "hex")
    return {c.signature_header: signed} | ({stamp: ts} if stamp else {})


def _attach_standard(
    c: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
) -> dict[str, str]:
    if not msg_id or not msg_id.isprintable() or msg_id != msg_id.strip():
        raise ValueError("standard_webhooks needs a printable msg_id without outer spaces")
    signed = "v1," + encode(mac(key, body, ts, msg_id), "base64")
    return {SW_ID: msg_id, SW_TIMESTAMP: ts, c.signature_header: signed}


_ATTACH: Final[Mapping[Scheme, Callable[[SignatureConfig, bytes, bytes, str], dict[str, str]]]] = {
    Scheme.GEONODE: _attach_geonode,
    Scheme.STRIPE: lambda c, k, body, ts: {
        c.signature_header: f"t={ts},v1={mac(k, body, ts, None).hex()}"
    },
    Scheme.GITHUB: lambda c, k, body, ts: {
        c.signature_header: GITHUB_PREFIX + mac(k, body, None, None).hex()
    },
}


def attach(
    config: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
) -> dict[str, str]:
    """The headers a sender adds to ``body`` signed at ``ts`` (``msg_id``: standard_webhooks)."""
    if config.scheme is Scheme.STANDARD_WEBHOOKS:
        return _attach_standard(config, key, body, ts, msg_id)
    return _ATTACH[config.scheme](config, key, body, ts)


def sign(
    config: SignatureConfig, body: bytes, secret: str, now: float, msg_id: str | None = None
) -> dict[str, str]:
    """The headers a sender attaches to ``body`` at ``now``; ``ValueError`` for an unusable
    secret or a missing ``msg_id`` (standard_webhooks)."""
    check_inputs(body, now)
    if not isinstance(secret, str) or not secret:  # the receiver's secrets are checked on reading
        raise ValueError("a webhook secret must be a non-empty string")
    return attach(config, key(config.scheme, secret), body, str(math.floor(now)), msg_id)
