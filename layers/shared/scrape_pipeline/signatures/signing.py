"""``sign`` and ``verify``, side by side, through the scheme's rules and one ``mac``.

``verify`` works on the raw request bytes, before anything reads the body, and compares
every candidate in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Iterable, Iterator, Mapping

from scrape_pipeline.signatures.config import SignatureConfig
from scrape_pipeline.signatures.errors import (
    NoValidSecretError,
    SignatureError,
    SignatureMismatchError,
)
from scrape_pipeline.signatures.headers import Headers
from scrape_pipeline.signatures.schemes import RULES, SchemeRules, mac
from scrape_pipeline.signatures.secret import WebhookSecret


def sign(
    config: SignatureConfig, body: bytes, secret: str, now: float, msg_id: str | None = None
) -> dict[str, str]:
    """The headers a sender attaches to ``body`` at ``now``. ``msg_id`` is for standard_webhooks.

    Raises ``ValueError`` for an unusable secret or a missing ``msg_id``.
    """
    _check_inputs(body, now)
    rules = RULES[config.kind]
    return rules.attach(config, rules.key(secret), body, str(math.floor(now)), msg_id)


def verify(
    config: SignatureConfig,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Iterable[WebhookSecret],
    now: float,
) -> None:
    """Return if an active secret signed ``body`` as ``headers`` claim, else ``SignatureError``.

    ``body`` is the raw request bytes, hashed as they are. Header names match in
    any case. Several secrets (rotation) and several signatures are accepted.
    """
    _check_inputs(body, now)
    rules = RULES[config.kind]
    # Our own misconfiguration first: with no usable key no request can pass, whatever it holds.
    keys = _active_keys(rules, secrets, now)
    presented = rules.present(config, Headers(headers))
    if presented.timestamp is not None:
        _check_tolerance(int(presented.timestamp), now, config.tolerance_seconds)
    for key in keys:
        expected = mac(key, body, presented.timestamp, presented.msg_id)
        if any(hmac.compare_digest(expected, candidate) for candidate in presented.candidates):
            return
    raise SignatureMismatchError()


def _active_keys(rules: SchemeRules, secrets: Iterable[WebhookSecret], now: float) -> list[bytes]:
    """The keys of the secrets active at ``now``; ``NoValidSecretError`` when there is none."""
    active = (secret.value for secret in _secrets(secrets) if secret.is_active(now))
    keys = list(filter(None, map(rules.usable_key, active)))
    if not keys:
        raise NoValidSecretError("no unexpired, well-formed secret is configured")
    return keys


def _secrets(secrets: Iterable[WebhookSecret]) -> Iterator[WebhookSecret]:
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
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        # NaN would make every tolerance and expiry comparison False, i.e. pass.
        raise ValueError("now must be finite epoch seconds")
