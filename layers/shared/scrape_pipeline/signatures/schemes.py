"""The four schemes, one class each: its key, what a request presents, what a sender attaches.

Every scheme signs through ``mac``, so signing and verifying cannot disagree on the bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from scrape_pipeline.signatures.config import Scheme, SignatureConfig
from scrape_pipeline.signatures.errors import SignatureError
from scrape_pipeline.signatures.headers import (
    Headers,
    decode,
    encode,
    prefixed_signature,
    timestamp,
    usable,
)

_SW_ID_HEADER: Final = "webhook-id"
_SW_TIMESTAMP_HEADER: Final = "webhook-timestamp"
_SW_SECRET_PREFIX: Final = "whsec_"  # noqa: S105 (a prefix, not a secret)
_GITHUB_PREFIX: Final = "sha256="


@dataclass(frozen=True)
class Presented:
    """What a request claims: its candidate signatures, and the timestamp and id they sign."""

    candidates: list[bytes]
    timestamp: str | None = None
    msg_id: str | None = None


def mac(key: bytes, body: bytes, timestamp: str | None, msg_id: str | None) -> bytes:
    """HMAC-SHA256 of ``[msg_id "."][timestamp "."]body``; the body is never decoded."""
    head = b"".join(part.encode() + b"." for part in (msg_id, timestamp) if part is not None)
    return hmac.new(key, head + body, hashlib.sha256).digest()


def utf8_key(secret: str) -> bytes:
    """The secret's UTF-8 bytes; ``ValueError`` for an empty or non-text secret."""
    if not isinstance(secret, str) or not secret:
        raise ValueError("a webhook secret must be a non-empty string")
    return secret.encode("utf-8")


class SchemeRules(ABC):
    """One scheme. The base keys with the secret's UTF-8 bytes; each scheme reads and attaches."""

    def key(self, secret: str) -> bytes:
        """The HMAC key of ``secret``; ``ValueError`` when it cannot be one."""
        return utf8_key(secret)

    def usable_key(self, secret: str) -> bytes | None:
        """The HMAC key of ``secret``, or None when it cannot be one."""
        try:
            return self.key(secret)
        except ValueError:
            return None  # one bad entry must not block the others during a rotation

    @abstractmethod
    def present(self, config: SignatureConfig, headers: Headers) -> Presented:
        """What the request's headers claim, or ``SignatureError`` when they are malformed."""

    @abstractmethod
    def attach(
        self, config: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
    ) -> dict[str, str]:
        """The headers a sender adds to ``body`` signed at ``ts``."""


class _Geonode(SchemeRules):
    """Configurable: header, prefix, encoding, and an optional signed timestamp header."""

    def present(self, config: SignatureConfig, headers: Headers) -> Presented:
        encoding = config.encoding or "hex"
        found = prefixed_signature(headers, config.signature_header, config.prefix, encoding)
        name = config.timestamp_header
        if name is None:
            return Presented(found)
        return Presented(found, timestamp=timestamp(headers.require(name), name))

    def attach(
        self, config: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
    ) -> dict[str, str]:
        name = config.timestamp_header
        digest = mac(key, body, ts if name is not None else None, None)
        signed = {config.signature_header: config.prefix + encode(digest, config.encoding or "hex")}
        return signed if name is None else {**signed, name: ts}


class _StandardWebhooks(SchemeRules):
    """``webhook-id``, ``webhook-timestamp`` and a space-separated ``v1,<b64>`` list."""

    def key(self, secret: str) -> bytes:
        utf8_key(secret)  # the same refusal of an empty or non-text secret
        encoded = secret.removeprefix(_SW_SECRET_PREFIX)
        # Some senders publish unpadded base64; restore the padding rather than reject.
        encoded += "=" * (-len(encoded) % 4)
        try:
            key = base64.b64decode(encoded, validate=True)
        except ValueError:  # binascii.Error and non-ASCII input are both ValueError
            raise ValueError("the secret is not whsec_ followed by base64") from None
        if not key:
            raise ValueError("the secret decodes to an empty key")
        return key

    def present(self, config: SignatureConfig, headers: Headers) -> Presented:
        name = config.signature_header
        msg_id = headers.require(_SW_ID_HEADER)
        ts = timestamp(headers.require(_SW_TIMESTAMP_HEADER), _SW_TIMESTAMP_HEADER)
        found: list[bytes | None] = []
        for entry in headers.require(name).split():
            # Entries of other versions (e.g. "v1a", asymmetric) are skipped, as the spec asks.
            if entry.startswith("v1,"):
                found.append(decode(entry.removeprefix("v1,"), "base64"))
        return Presented(usable(found, name, "no v1 signature"), timestamp=ts, msg_id=msg_id)

    def attach(
        self, config: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
    ) -> dict[str, str]:
        if not msg_id or not msg_id.isprintable() or msg_id != msg_id.strip():
            raise ValueError("standard_webhooks needs a printable msg_id without outer spaces")
        digest = mac(key, body, ts, msg_id)
        return {
            _SW_ID_HEADER: msg_id,
            _SW_TIMESTAMP_HEADER: ts,
            config.signature_header: "v1," + encode(digest, "base64"),
        }


class _Stripe(SchemeRules):
    """``Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>]``; other labels (v0) are ignored."""

    def present(self, config: SignatureConfig, headers: Headers) -> Presented:
        name = config.signature_header
        ts: str | None = None
        found: list[bytes | None] = []
        for item in headers.require(name).split(","):
            label, sep, value = item.strip().partition("=")
            field = label + sep  # "t=" or "v1=": a label without "=" is no field
            if field == "t=":
                if ts is not None:
                    raise SignatureError("malformed header", f"{name} has two timestamps")
                ts = timestamp(value, name)
            elif field == "v1=":
                found.append(decode(value, "hex"))
            # Other labels (v0 test-mode signatures, future schemes) are ignored, as Stripe says.
        if ts is None:
            raise SignatureError("malformed header", f"{name} has no t= timestamp")
        return Presented(usable(found, name, "no v1 signature"), timestamp=ts)

    def attach(
        self, config: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
    ) -> dict[str, str]:
        return {config.signature_header: f"t={ts},v1={mac(key, body, ts, None).hex()}"}


class _GitHub(SchemeRules):
    """``X-Hub-Signature-256: sha256=<hex>`` over the body alone."""

    def present(self, config: SignatureConfig, headers: Headers) -> Presented:
        return Presented(
            prefixed_signature(headers, config.signature_header, _GITHUB_PREFIX, "hex")
        )

    def attach(
        self, config: SignatureConfig, key: bytes, body: bytes, ts: str, msg_id: str | None
    ) -> dict[str, str]:
        return {config.signature_header: _GITHUB_PREFIX + mac(key, body, None, None).hex()}


RULES: Final[Mapping[Scheme, SchemeRules]] = {
    Scheme.GEONODE: _Geonode(),
    Scheme.STANDARD_WEBHOOKS: _StandardWebhooks(),
    Scheme.STRIPE: _Stripe(),
    Scheme.GITHUB: _GitHub(),
}
