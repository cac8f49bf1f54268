"""``sign`` and ``verify``, side by side, through the scheme's rules and one ``mac``.

``verify`` works on the raw request bytes, before anything reads the body, and compares
every candidate in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import contextlib
import hmac
import math
from collections.abc import Iterable, Iterator, Mapping

from scrape_pipeline.signatures.config import SignatureConfig
from scrape_pipeline.signatures.errors import (
    NoValidSecretError,
    SignatureError,
    SignatureMismatchError,
)
from scrape_pipeline.signatures.schemes import PRESENT, Presented, attach, key, mac
from scrape_pipeline.signatures.secret import WebhookSecret


def sign(
    config: SignatureConfig, body: bytes, secret: str, now: float, msg_id: str | None = None
) -> dict[str, str]:
    """The headers a sender attaches to ``body`` at ``now``; ``ValueError`` for an unusable
    secret or a missing ``msg_id`` (standard_webhooks)."""
    _check_inputs(body, now)
    return attach(config, key(config.kind, secret), body, str(math.floor(now)), msg_id)


def verify(
    config: SignatureConfig,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Iterable[WebhookSecret],
    now: float,
) -> None:
    """Return if an active secret signed the raw ``body`` as ``headers`` (any case) claim, else
    ``SignatureError``; several secrets (rotation) and several signatures are accepted."""
    _check_inputs(body, now)
    # Our own misconfiguration first: with no usable key no request can pass, whatever it holds.
    keys = _active_keys(config, secrets, now)
    presented = PRESENT[config.kind](config, headers)
    if presented.timestamp is not None:
        _check_tolerance(int(presented.timestamp), now, config.tolerance_seconds)
    if not any(_signed_by(k, body, presented) for k in keys):
        raise SignatureMismatchError()


def _signed_by(key: bytes, body: bytes, presented: Presented) -> bool:
    """``key`` made one of the candidates, compared in constant time."""
    expected = mac(key, body, presented.timestamp, presented.msg_id)
    return any(hmac.compare_digest(expected, candidate) for candidate in presented.candidates)


def _active_keys(
    config: SignatureConfig, secrets: Iterable[WebhookSecret], now: float
) -> list[bytes]:
    """The keys of the secrets active at ``now``; ``NoValidSecretError`` when there is none."""
    keys = []
    for secret in _checked(secrets):
        if secret.is_active(now):
            # One bad entry must not block the others during a rotation.
            with contextlib.suppress(ValueError):
                keys.append(key(config.kind, secret.value))
    if not keys:
        raise NoValidSecretError("no unexpired, well-formed secret is configured")
    return keys


def _checked(secrets: Iterable[WebhookSecret]) -> Iterator[WebhookSecret]:
    """Each of ``secrets``; ``TypeError`` for a str, a lone secret, or anything else in it."""
    if isinstance(secrets, str | WebhookSecret):
        raise TypeError("secrets must be an iterable of WebhookSecret")
    for secret in secrets:
        if not isinstance(secret, WebhookSecret):
            raise TypeError("secrets must be an iterable of WebhookSecret")
        yield secret


def _check_tolerance(signed_at: int, now: float, tolerance: int) -> None:
    skew = now - signed_at
    if abs(skew) > tolerance:
        # Both ways: a far-future timestamp would otherwise stay replayable for longer.
        direction = "old" if skew > 0 else "far in the future"
        raise SignatureError("timestamp outside tolerance", f"more than {tolerance} s {direction}")


def _check_inputs(body: bytes, now: float) -> None:
    if not isinstance(body, bytes | bytearray):
        # A str body was already decoded (or is still base64): the caller must pass raw bytes.
        raise TypeError("body must be the raw request bytes")
    _check_now(now)


def _check_now(now: float) -> None:
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        # NaN would make every tolerance and expiry comparison False, i.e. pass.
        raise ValueError("now must be finite epoch seconds")
