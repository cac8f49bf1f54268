"""Signing webhook deliveries under each scheme the receiver may be asked to verify.

Written apart from the receiver's verifier on purpose, so each checks the other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret # nosec B105


def new_secret(rng: random.Random) -> str:
    """``whsec_`` + base64 of 24 random bytes (Standard Webhooks decodes what follows)."""
    return SECRET_PREFIX + base64.b64encode(rng.randbytes(24)).decode("ascii")


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def sign(
    scheme: str,
    secret: str,
    body: bytes,
    *,
    message_id: str,
    timestamp: int,
    header: str = "X-Webhook-Signature",
    prefix: str = "",
) -> dict[str, str]:
    """The signature headers for ``body`` under ``scheme``.

    ``message_id`` (the event id, stable across retries) and ``timestamp`` (epoch seconds) are
    used by the schemes that sign them; ``header`` and ``prefix`` by the geonode scheme only.
    """
    if scheme == "geonode":
        return {header: prefix + _hmac(secret.encode(), body).hex()}
    if scheme == "standard_webhooks":
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
        signed = f"{message_id}.{timestamp}.".encode() + body
        signature = base64.b64encode(_hmac(key, signed)).decode("ascii")
        return {
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": f"v1,{signature}",
        }
    if scheme == "stripe":
        signed = f"{timestamp}.".encode() + body
        return {"Stripe-Signature": f"t={timestamp},v1={_hmac(secret.encode(), signed).hex()}"}
    if scheme == "github":
        return {"X-Hub-Signature-256": "sha256=" + _hmac(secret.encode(), body).hex()}
    raise ValueError(f"unknown signature scheme {scheme!r}")
