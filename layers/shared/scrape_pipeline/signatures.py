"""Webhook signature signing and verification: pure, small, standard library only.

The receiver Lambda imports this on every cold start, so it stays on the standard
library. ``verify`` and ``sign`` compute through one primitive (``_digest_for``),
so what the simulator and tests sign is by construction what the receiver checks.

Schemes (``SIGNATURE_SCHEME``); every one is HMAC-SHA256::

    geonode (default)  X-Webhook-Signature: <prefix><hex|base64>
                       signed: body, or ts "." body with a timestamp header; key: secret UTF-8
    standard_webhooks  webhook-id, webhook-timestamp, webhook-signature: "v1,<b64> v1,<b64>"
                       signed: id "." ts "." body; key: base64 of the secret after "whsec_"
    stripe             Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>]  (v0 and others ignored)
                       signed: ts "." body; key: the whole secret string, UTF-8
    github             X-Hub-Signature-256: sha256=<hex>
                       signed: body; key: secret UTF-8

Only ``geonode`` is configurable (Geonode does not publish its header name,
encoding, prefix or signed timestamp); the other three are published formats
and are fixed.

Environment (``SignatureConfig.from_env``; an empty value counts as unset,
because SAM parameters default to "")::

    SIGNATURE_SCHEME             geonode | standard_webhooks | stripe | github  (geonode)
    SIGNATURE_HEADER             geonode signature header          (X-Webhook-Signature)
    SIGNATURE_ENCODING           geonode: hex | base64             (hex)
    SIGNATURE_PREFIX             geonode: e.g. "sha256="           (none)
    SIGNATURE_TIMESTAMP_HEADER   geonode: header signed as ts "." body  (none: body only)
    SIGNATURE_TOLERANCE_SECONDS  max |now - ts| for timestamps, > 0  (300)

Errors (``scrape_pipeline.errors`` draws the tree): every verification failure raises
``SignatureError`` with a short ``reason``; the two a receiver acts on have classes of their
own, ``SignatureMismatchError`` (no secret signed it: maybe one was just rotated) and
``NoValidSecretError`` (no usable secret is configured: ours to fix). A malformed stored
bundle raises ``SecretBundleError``, a bad ``SIGNATURE_*`` variable ``SettingsError``, both
``ValueError``s like the other configuration errors; programming errors raise ``TypeError``.
No message or repr here carries a secret, a received header value or a computed
signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal, cast

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.settings import SettingsError, read_choice, read_int, read_str

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "SCHEMES",
    "Encoding",
    "FailureReason",
    "NoValidSecretError",
    "Scheme",
    "SecretBundleError",
    "SignatureConfig",
    "SignatureError",
    "SignatureMismatchError",
    "WebhookSecret",
    "WebhookSecrets",
    "parse_secret_bundle",
    "sign",
    "verify",
]

Scheme = Literal["geonode", "standard_webhooks", "stripe", "github"]
Encoding = Literal["hex", "base64"]
FailureReason = Literal[
    "missing header",
    "malformed header",
    "timestamp outside tolerance",
    "no matching signature",
    "no valid secret",
]

SCHEMES: Final[tuple[Scheme, ...]] = ("geonode", "standard_webhooks", "stripe", "github")
ENCODINGS: Final[tuple[Encoding, ...]] = ("hex", "base64")
DEFAULT_TOLERANCE_SECONDS: Final = 300

_SIGNATURE_HEADER: Final[Mapping[Scheme, str]] = {
    "geonode": "X-Webhook-Signature",
    "standard_webhooks": "webhook-signature",
    "stripe": "Stripe-Signature",
    "github": "X-Hub-Signature-256",
}
_SW_ID_HEADER: Final = "webhook-id"
_SW_TIMESTAMP_HEADER: Final = "webhook-timestamp"
_SW_SECRET_PREFIX: Final = "whsec_"  # noqa: S105 (a prefix, not a secret)
_GITHUB_PREFIX: Final = "sha256="
_DIGEST_SIZE: Final = 32  # SHA-256
# RFC 9110 token characters: what a header name may contain.
_TCHAR: Final = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
_HEX: Final = frozenset("0123456789abcdefABCDEF")
# Ten digits cover epoch seconds until the year 2286; a cap keeps int() cheap on junk.
_MAX_TIMESTAMP_DIGITS: Final = 12
_MAX_TOLERANCE_SECONDS: Final = 999_999_999  # nine digits: over 31 years
_SETTINGS_NAMES: Final = (
    "SIGNATURE_SCHEME",
    "SIGNATURE_HEADER",
    "SIGNATURE_ENCODING",
    "SIGNATURE_PREFIX",
    "SIGNATURE_TIMESTAMP_HEADER",
    "SIGNATURE_TOLERANCE_SECONDS",
)


class SignatureError(PipelineError):
    """The request is not authentically signed. ``reason`` is one short, stable phrase.

    The message names headers at most: never their values, which are attacker
    controlled, and never a secret or an expected signature.
    """

    def __init__(self, reason: FailureReason, detail: str = "") -> None:
        self.reason: FailureReason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


class SignatureMismatchError(SignatureError):
    """Well-formed and in time, but no active secret signed it (a rotation may explain it)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("no matching signature", detail)


class NoValidSecretError(SignatureError):
    """No unexpired, well-formed secret is configured: no request can pass, whatever it holds."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("no valid secret", detail)


class SecretBundleError(PipelineError, ValueError):
    """The stored secret bundle is malformed; the message names the position, never the content."""


@dataclass(frozen=True, repr=False)
class WebhookSecret:
    """One signing secret; ``expires_at`` (epoch seconds) ends its rotation grace period.

    Geonode's rotate-secret switches the sender at once, but the receiver's
    cached copy and the deliveries already signed (in flight, or being retried)
    switch later: keeping the previous secret until ``expires_at`` bridges that.
    """

    value: str
    expires_at: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not self.value:
            # An empty HMAC key is a valid key that anyone can use.
            raise ValueError("a webhook secret must be a non-empty string")
        if self.expires_at is not None and (
            isinstance(self.expires_at, bool)
            or not isinstance(self.expires_at, int | float)
            or not math.isfinite(self.expires_at)
        ):
            # NaN would compare False against every `now` and never expire.
            raise ValueError("expires_at must be finite epoch seconds or None")

    def is_active(self, now: float) -> bool:
        """True until ``expires_at``; the expiry instant itself is expired (as JWT ``exp``)."""
        return self.expires_at is None or now < self.expires_at

    def __repr__(self) -> str:
        return f"WebhookSecret(value=<redacted>, expires_at={self.expires_at!r})"


@dataclass(frozen=True)
class SignatureConfig:
    """How deliveries are signed. ``None`` fields take the scheme's fixed or default value."""

    scheme: Scheme = "geonode"
    header: str | None = None
    encoding: Encoding | None = None
    prefix: str = ""
    timestamp_header: str | None = None
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown signature scheme {self.scheme!r}; expected one of {SCHEMES}")
        if (
            isinstance(self.tolerance_seconds, bool)
            or not isinstance(self.tolerance_seconds, int)
            or self.tolerance_seconds <= 0
        ):
            # Stripe's library skips the check when tolerance is falsy; here 0 is a mistake.
            raise ValueError("tolerance_seconds must be a positive integer; it cannot be disabled")
        if self.scheme != "geonode":
            # The published schemes fix these; a setting that is silently ignored hides a typo.
            if self.header is not None or self.encoding is not None:
                raise ValueError(f"scheme {self.scheme!r} fixes its header and encoding")
            if self.prefix or self.timestamp_header is not None:
                raise ValueError(f"scheme {self.scheme!r} fixes its prefix and timestamp")
            return
        for name in (self.header, self.timestamp_header):
            if name is not None and not (name and set(name) <= _TCHAR):
                raise ValueError(f"header name {name!r} is not a valid HTTP header name")
        if self.encoding is not None and self.encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {self.encoding!r}; expected one of {ENCODINGS}")
        if not isinstance(self.prefix, str) or not (
            self.prefix.isascii() and self.prefix.isprintable()
        ):
            raise ValueError("prefix must be printable ASCII")
        if any(c.isspace() for c in self.prefix):
            raise ValueError("prefix must not contain whitespace")
        if (
            self.timestamp_header is not None
            and self.timestamp_header.lower() == self.signature_header.lower()
        ):
            raise ValueError("timestamp_header must differ from the signature header")

    @property
    def signature_header(self) -> str:
        """The header that carries the signature(s)."""
        return self.header or _SIGNATURE_HEADER[self.scheme]

    @property
    def signs_timestamp(self) -> bool:
        """The signed bytes include a timestamp that ``verify`` holds to the tolerance.

        When they do not (geonode without a timestamp header, github), a signature alone
        proves nothing about when the delivery was made: ``scrape_pipeline.freshness`` reads
        the time from the signed body instead.
        """
        if self.scheme == "geonode":
            return self.timestamp_header is not None
        return self.scheme in ("standard_webhooks", "stripe")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SignatureConfig:
        """Read the ``SIGNATURE_*`` variables (module docstring); ``SettingsError`` if invalid."""

        def get(name: str) -> str | None:
            return read_str(environ, name, "") or None

        scheme = read_choice(environ, "SIGNATURE_SCHEME", "geonode", SCHEMES)
        encoding = read_choice(environ, "SIGNATURE_ENCODING", "", ENCODINGS) or None
        tolerance = read_int(
            environ,
            "SIGNATURE_TOLERANCE_SECONDS",
            DEFAULT_TOLERANCE_SECONDS,
            maximum=_MAX_TOLERANCE_SECONDS,
        )
        try:
            return cls(
                scheme=cast(Scheme, scheme),
                header=get("SIGNATURE_HEADER"),
                encoding=cast("Encoding | None", encoding),
                prefix=get("SIGNATURE_PREFIX") or "",
                timestamp_header=get("SIGNATURE_TIMESTAMP_HEADER"),
                tolerance_seconds=tolerance,
            )
        except ValueError as exc:
            raise SettingsError(
                f"invalid SIGNATURE_* settings: {exc}", names=_SETTINGS_NAMES
            ) from exc


@dataclass(frozen=True)
class WebhookSecrets:
    """The stored bundle: each subscription's secrets by webhook id, and secrets shared by all.

    Each subscription has its own secret at Geonode, so a rotation retires one subscription's
    previous secret only. ``shared`` is what an old flat bundle held: one list for every
    subscription, which one signs with which unknown; the next rotation gives each
    subscription its own copy (``scrape_pipeline_ops.rotation``).
    """

    subscriptions: Mapping[str, tuple[WebhookSecret, ...]] = field(default_factory=dict)
    shared: tuple[WebhookSecret, ...] = ()

    def of(self, webhook_id: str) -> tuple[WebhookSecret, ...]:
        """The secrets that may have signed ``webhook_id``'s deliveries: its own and the shared."""
        return (*self.subscriptions.get(webhook_id, ()), *self.shared)

    def valid_for(self, webhook_id: str, now: float) -> list[WebhookSecret]:
        """``webhook_id``'s secrets still valid at ``now`` (none: its deliveries are refused)."""
        return [s for s in self.of(webhook_id) if s.is_active(now)]

    def every(self) -> list[WebhookSecret]:
        """Every subscription's secrets once each, the current (unexpiring) ones first.

        The receiver tries them all: the subscription that sent a delivery is named only in
        the body, which is parsed after the signature is verified, never before.
        """
        unique = dict.fromkeys(
            [*(s for group in self.subscriptions.values() for s in group), *self.shared]
        )
        return sorted(unique, key=lambda s: s.expires_at is not None)


_UNPARSABLE: Final = object()
_BUNDLE_KEYS: Final = frozenset({"secrets", "subscriptions"})


def parse_secret_bundle(raw: str) -> WebhookSecrets:
    """Read a Secrets Manager value: a plain secret, or a JSON bundle (below).

        {"subscriptions": {"<webhook id>": [{"value": ..., "expires_at": ...}, ...], ...}}
        {"secrets": [{"value": ..., "expires_at": ...}, ...]}   (old: shared by all)

    Both keys may be present while an old bundle is being migrated. ``expires_at`` is an
    ISO 8601 date-time with a time zone, or null. Errors name the position, never the
    content: the content is the secret.
    """
    if not isinstance(raw, str):
        raise TypeError("the secret bundle must be a str")
    # A trailing newline sneaks in when the secret is stored from a file.
    text = raw.strip()
    if not text:
        raise SecretBundleError("the secret bundle is empty")
    if not text.startswith(("{", "[")):
        return WebhookSecrets(shared=(WebhookSecret(text),))
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        document = _UNPARSABLE
    if document is _UNPARSABLE:
        # Raised outside the handler: the JSON error keeps the whole document in `.doc`,
        # and a chained (even suppressed) context would carry it into error reporters.
        raise SecretBundleError("the secret bundle looks like JSON but does not parse")
    if not isinstance(document, dict) or not document or not set(document) <= _BUNDLE_KEYS:
        raise SecretBundleError(
            'the secret bundle must be an object with the keys "subscriptions" and/or "secrets"'
        )
    shared = _parse_secret_list(document["secrets"], "secrets") if "secrets" in document else ()
    by_id = document.get("subscriptions", {})
    if not isinstance(by_id, dict) or ("secrets" not in document and not by_id):
        raise SecretBundleError('"subscriptions" must be a non-empty object of webhook ids')
    subscriptions: dict[str, tuple[WebhookSecret, ...]] = {}
    for index, (webhook_id, entries) in enumerate(by_id.items()):
        if not webhook_id.strip():
            raise SecretBundleError(f"subscription #{index} has an empty webhook id")
        subscriptions[webhook_id] = _parse_secret_list(entries, f"subscriptions[#{index}]")
    return WebhookSecrets(subscriptions, shared)


def _parse_secret_list(entries: Any, where: str) -> tuple[WebhookSecret, ...]:
    if not isinstance(entries, list) or not entries:
        raise SecretBundleError(f"{where} must be a non-empty list")
    return tuple(_parse_bundle_entry(entry, f"{where}[{i}]") for i, entry in enumerate(entries))


def _parse_bundle_entry(entry: Any, where: str) -> WebhookSecret:
    # Unknown keys are rejected: a misspelt "expire_at" would otherwise keep an old secret forever.
    if (
        not isinstance(entry, dict)
        or "value" not in entry
        or not set(entry) <= {"value", "expires_at"}
    ):
        raise SecretBundleError(f'{where} must be an object with "value" and optional "expires_at"')
    value = entry["value"]
    if not isinstance(value, str) or not value:
        raise SecretBundleError(f"{where}.value must be a non-empty string")
    expires = entry.get("expires_at")
    if expires is None:
        return WebhookSecret(value)
    try:
        moment = datetime.fromisoformat(expires) if isinstance(expires, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        # A naive time would depend on the Lambda's TZ; insist on an explicit zone.
        raise SecretBundleError(
            f"{where}.expires_at must be an ISO 8601 date-time with a time zone, or null"
        )
    return WebhookSecret(value, expires_at=moment.timestamp())


def sign(
    config: SignatureConfig, body: bytes, secret: str, now: float, msg_id: str | None = None
) -> dict[str, str]:
    """The headers a sender attaches to ``body`` at ``now``. ``msg_id`` is for standard_webhooks.

    Raises ``ValueError`` for an unusable secret or a missing ``msg_id``.
    """
    _check_inputs(body, now)
    key = _derive_key(config.scheme, secret)
    timestamp = str(math.floor(now))
    name = config.signature_header
    if config.scheme == "standard_webhooks":
        if not msg_id or not msg_id.isprintable() or msg_id != msg_id.strip():
            raise ValueError("standard_webhooks needs a printable msg_id without outer spaces")
        digest = _digest_for(config.scheme, key, body, timestamp, msg_id)
        return {
            _SW_ID_HEADER: msg_id,
            _SW_TIMESTAMP_HEADER: timestamp,
            name: "v1," + _encode(digest, "base64"),
        }
    if config.scheme == "stripe":
        digest = _digest_for(config.scheme, key, body, timestamp, None)
        return {name: f"t={timestamp},v1={digest.hex()}"}
    if config.scheme == "github":
        return {name: _GITHUB_PREFIX + _digest_for(config.scheme, key, body, None, None).hex()}
    encoding = config.encoding or "hex"
    if config.timestamp_header is None:
        digest = _digest_for(config.scheme, key, body, None, None)
        return {name: config.prefix + _encode(digest, encoding)}
    digest = _digest_for(config.scheme, key, body, timestamp, None)
    return {name: config.prefix + _encode(digest, encoding), config.timestamp_header: timestamp}


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
    if isinstance(secrets, str | WebhookSecret):
        raise TypeError("secrets must be an iterable of WebhookSecret")
    # Our own misconfiguration first: with no usable key no request can pass, whatever it holds.
    keys = []
    for secret in secrets:
        if not isinstance(secret, WebhookSecret):
            raise TypeError("secrets must be an iterable of WebhookSecret")
        if secret.is_active(now):
            try:
                keys.append(_derive_key(config.scheme, secret.value))
            except ValueError:
                continue  # one bad entry must not block the others during a rotation
    if not keys:
        raise NoValidSecretError("no unexpired, well-formed secret is configured")

    timestamp, msg_id, candidates = _presented(config, _CaseInsensitive(headers))
    if timestamp is not None:
        skew = now - int(timestamp)
        if abs(skew) > config.tolerance_seconds:
            # Both ways: a far-future timestamp would otherwise stay replayable for longer.
            direction = "old" if skew > 0 else "far in the future"
            raise SignatureError(
                "timestamp outside tolerance",
                f"more than {config.tolerance_seconds} s {direction}",
            )
    for key in keys:
        expected = _digest_for(config.scheme, key, body, timestamp, msg_id)
        if any(hmac.compare_digest(expected, candidate) for candidate in candidates):
            return
    raise SignatureMismatchError()


# --- the shared primitive -------------------------------------------------------------------


def _digest_for(
    scheme: Scheme, key: bytes, body: bytes, timestamp: str | None, msg_id: str | None
) -> bytes:
    """HMAC-SHA256 over the scheme's signed bytes; the body is appended untouched, never decoded."""
    if scheme == "standard_webhooks":
        signed = f"{msg_id}.{timestamp}.".encode() + body
    elif timestamp is not None:
        signed = timestamp.encode("ascii") + b"." + body
    else:
        signed = body
    return hmac.new(key, signed, hashlib.sha256).digest()


def _derive_key(scheme: Scheme, secret: str) -> bytes:
    if not isinstance(secret, str) or not secret:
        raise ValueError("a webhook secret must be a non-empty string")
    if scheme != "standard_webhooks":
        return secret.encode("utf-8")
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


def _check_inputs(body: bytes, now: float) -> None:
    if not isinstance(body, bytes | bytearray):
        # A str body was already decoded (or is still base64): the caller must pass raw bytes.
        raise TypeError("body must be the raw request bytes")
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        # NaN would make every tolerance and expiry comparison False, i.e. pass.
        raise ValueError("now must be finite epoch seconds")


# --- reading what the request presents ------------------------------------------------------


class _CaseInsensitive:
    """Header lookup in any case; two spellings with different values are ambiguous, not chosen."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def require(self, name: str) -> str:
        wanted = name.lower()
        values = {v for k, v in self._headers.items() if isinstance(k, str) and k.lower() == wanted}
        if not values:
            raise SignatureError("missing header", name)
        if len(values) > 1:
            raise SignatureError("malformed header", f"{name} appears with different values")
        value = values.pop()
        if not isinstance(value, str):
            raise SignatureError("malformed header", f"{name} is not text")
        # RFC 9110: surrounding whitespace is not part of a field value.
        value = value.strip(" \t")
        if not value:
            raise SignatureError("malformed header", f"{name} is empty")
        return value


def _presented(
    config: SignatureConfig, headers: _CaseInsensitive
) -> tuple[str | None, str | None, list[bytes]]:
    """(timestamp as sent, message id, decoded candidate signatures), or ``SignatureError``."""
    if config.scheme == "standard_webhooks":
        return _presented_standard(config.signature_header, headers)
    if config.scheme == "stripe":
        return _presented_stripe(config.signature_header, headers)
    if config.scheme == "github":
        return (
            None,
            None,
            _presented_single(config.signature_header, _GITHUB_PREFIX, "hex", headers),
        )
    candidates = _presented_single(
        config.signature_header, config.prefix, config.encoding or "hex", headers
    )
    if config.timestamp_header is None:
        return None, None, candidates
    name = config.timestamp_header
    return _timestamp(headers.require(name), name), None, candidates


def _presented_standard(name: str, headers: _CaseInsensitive) -> tuple[str, str, list[bytes]]:
    msg_id = headers.require(_SW_ID_HEADER)
    timestamp = _timestamp(headers.require(_SW_TIMESTAMP_HEADER), _SW_TIMESTAMP_HEADER)
    found: list[bytes | None] = []
    for entry in headers.require(name).split():
        version, sep, encoded = entry.partition(",")
        # Entries of other versions (e.g. "v1a", asymmetric) are skipped, as the spec asks.
        if version == "v1" and sep:
            found.append(_decode(encoded, "base64"))
    return timestamp, msg_id, _some(found, name, "no v1 signature")


def _presented_stripe(name: str, headers: _CaseInsensitive) -> tuple[str, None, list[bytes]]:
    timestamp: str | None = None
    found: list[bytes | None] = []
    for item in headers.require(name).split(","):
        label, sep, value = item.strip().partition("=")
        if label == "t" and sep:
            if timestamp is not None:
                raise SignatureError("malformed header", f"{name} has two timestamps")
            timestamp = _timestamp(value, name)
        elif label == "v1" and sep:
            found.append(_decode(value, "hex"))
        # Other labels (v0 test-mode signatures, future schemes) are ignored, as Stripe says.
    if timestamp is None:
        raise SignatureError("malformed header", f"{name} has no t= timestamp")
    return timestamp, None, _some(found, name, "no v1 signature")


def _presented_single(
    name: str, prefix: str, encoding: Encoding, headers: _CaseInsensitive
) -> list[bytes]:
    value = headers.require(name)
    if not value.startswith(prefix):
        raise SignatureError("malformed header", f"{name} lacks its prefix")
    return _some([_decode(value[len(prefix) :], encoding)], name, "not a signature")


def _some(candidates: list[bytes | None], name: str, problem: str) -> list[bytes]:
    # Undecodable entries beside a good one are skipped (any valid signature suffices);
    # a header with none left is malformed.
    usable = [c for c in candidates if c is not None]
    if not usable:
        raise SignatureError("malformed header", f"{name}: {problem}")
    return usable


def _encode(digest: bytes, encoding: Encoding) -> str:
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode("ascii")


def _decode(text: str, encoding: Encoding) -> bytes | None:
    """The 32 signature bytes, or None when ``text`` is not exactly that in ``encoding``."""
    if encoding == "hex":
        # bytes.fromhex alone would accept spaces between bytes; check the alphabet first.
        if len(text) != 2 * _DIGEST_SIZE or not set(text) <= _HEX:
            return None
        return bytes.fromhex(text)
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        return None
    return raw if len(raw) == _DIGEST_SIZE else None


def _timestamp(text: str, name: str) -> str:
    # ASCII digits only: int() would also take "+1", "1_0", " 1" and non-ASCII digits.
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_TIMESTAMP_DIGITS):
        raise SignatureError("malformed header", f"{name} is not integer epoch seconds")
    return text  # signed as sent, so a sender's leading zeros still verify
