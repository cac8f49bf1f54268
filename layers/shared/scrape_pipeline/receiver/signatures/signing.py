"""``verify`` on the raw request bytes, in constant time, through the one ``mac`` that ops'
``sign`` uses too; a header's problem names the header, never its value."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.receiver.signatures.config import Encoding, Scheme, SignatureConfig
from scrape_pipeline.receiver.signatures.secret import WebhookSecret, finite, first_broken

FailureReason = Literal[
    "missing header",
    "malformed header",
    "timestamp outside tolerance",
    "no matching signature",
    "no valid secret",
]


class SignatureError(PipelineError):
    """Not authentically signed; ``reason`` is one short phrase, the message names headers at
    most (never their attacker-controlled values, a secret or an expected signature)."""

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


DIGEST_SIZE: Final = 32  # SHA-256
SW_ID: Final = "webhook-id"
SW_TIMESTAMP: Final = "webhook-timestamp"
_SW_SECRET_PREFIX: Final = "whsec_"  # noqa: S105 (a prefix, not a secret)
GITHUB_PREFIX: Final = "sha256="
_HEX: Final = re.compile(f"[0-9a-fA-F]{{{2 * DIGEST_SIZE}}}")
# ASCII digits only (int() also takes "+1", "1_0", " 1"); twelve keep int() cheap on junk.
_EPOCH_SECONDS: Final = re.compile("[0-9]{1,12}")


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


def key(scheme: Scheme, secret: str) -> bytes:
    """The HMAC key of a non-empty ``secret``: its UTF-8, or standard_webhooks' base64 after
    "whsec_"; ``ValueError`` when it cannot be one."""
    return _sw_key(secret) if scheme is Scheme.STANDARD_WEBHOOKS else secret.encode("utf-8")


def _sw_key(secret: str) -> bytes:
    encoded = secret.removeprefix(_SW_SECRET_PREFIX)
    # Some senders publish unpadded base64; an empty key would be anyone's.
    if decoded := decode_base64(encoded + "=" * (-len(encoded) % 4)):
        return decoded
    raise ValueError("the secret is not whsec_ followed by non-empty base64")


def decode_base64(text: str) -> bytes | None:
    """Strict base64's bytes, or None (its error would chain the attacker's text)."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        return None


def _malformed(detail: str) -> SignatureError:
    return SignatureError("malformed header", detail)


def header(headers: Mapping[str, str], name: str) -> str:
    """The value of ``name`` in any case, without surrounding blanks (RFC 9110); two spellings
    with different values are ambiguous, not chosen."""
    wanted = name.lower()
    values = list({v for k, v in headers.items() if k.lower() == wanted})
    if (problem := first_broken(values, _VALUE_RULES)) is not None:
        raise SignatureError(problem[0], problem[1].format(name=name))
    return values[0].strip(" \t")


# A header's distinct values: the failure and its detail.
_VALUE_RULES: Final[tuple[tuple[Callable[[Any], bool], tuple[FailureReason, str]], ...]] = (
    (lambda values: not values, ("missing header", "{name}")),
    (lambda values: len(values) > 1, ("malformed header", "{name} appears with different values")),
    (lambda values: not isinstance(values[0], str), ("malformed header", "{name} is not text")),
    (lambda values: not cast(str, values[0]).strip(" \t"), ("malformed header", "{name} is empty")),
)


def _timestamp(text: str, name: str) -> str:
    """Integer epoch seconds exactly as sent (signed as sent: leading zeros still verify)."""
    if not _EPOCH_SECONDS.fullmatch(text):
        raise _malformed(f"{name} is not integer epoch seconds")
    return text


def _from_hex(text: str) -> bytes | None:
    # bytes.fromhex alone would accept spaces between bytes.
    return bytes.fromhex(text) if _HEX.fullmatch(text) else None


def _from_base64(text: str) -> bytes | None:
    raw = decode_base64(text) or b""
    return raw if len(raw) == DIGEST_SIZE else None


def _usable(candidates: list[bytes | None], name: str) -> list[bytes]:
    """The decodable candidates (any valid one suffices); a header with none is malformed."""
    found = list(filter(None, candidates))
    if not found:
        raise _malformed(f"{name} holds no usable signature")
    return found


def _prefixed(headers: Mapping[str, str], name: str, prefix: str, enc: Encoding) -> list[bytes]:
    value = header(headers, name)
    if not value.startswith(prefix):
        raise _malformed(f"{name} lacks its prefix")
    decode = _from_base64 if enc == "base64" else _from_hex
    return _usable([decode(value[len(prefix) :])], name)


def _geonode(config: SignatureConfig, headers: Mapping[str, str]) -> Presented:
    found = _prefixed(headers, config.signature_header, config.prefix, config.encoding or "hex")
    name = config.timestamp_header
    return Presented(found, None if name is None else _timestamp(header(headers, name), name))


def _standard_webhooks(config: SignatureConfig, headers: Mapping[str, str]) -> Presented:
    name = config.signature_header
    msg_id = header(headers, SW_ID)
    ts = _timestamp(header(headers, SW_TIMESTAMP), SW_TIMESTAMP)
    # Entries of other versions (e.g. "v1a", asymmetric) are skipped, as the spec asks.
    found = [_from_base64(e[3:]) for e in header(headers, name).split() if e[:3] == "v1,"]
    return Presented(_usable(found, name), ts, msg_id)


def _stripe(config: SignatureConfig, headers: Mapping[str, str]) -> Presented:
    name = config.signature_header
    # By label; others (v0 test-mode signatures, future schemes) are ignored, as Stripe says.
    fields = [item.strip().partition("=") for item in header(headers, name).split(",")]
    stamps = [value for label, sep, value in fields if label + sep == "t="]
    if len(stamps) != 1:
        raise _malformed(f"{name} needs one t= timestamp")
    found = [_from_hex(value) for label, sep, value in fields if label + sep == "v1="]
    return Presented(_usable(found, name), _timestamp(stamps[0], name))


def _github(config: SignatureConfig, headers: Mapping[str, str]) -> Presented:
    return Presented(_prefixed(headers, config.signature_header, GITHUB_PREFIX, "hex"))


PRESENT: Final[Mapping[Scheme, Callable[[SignatureConfig, Mapping[str, str]], Presented]]] = {
    Scheme.GEONODE: _geonode,
    Scheme.STANDARD_WEBHOOKS: _standard_webhooks,
    Scheme.STRIPE: _stripe,
    Scheme.GITHUB: _github,
}


def verify(
    config: SignatureConfig,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Iterable[WebhookSecret],
    now: float,
) -> None:
    """Return if an active secret signed the raw ``body`` as ``headers`` (any case) claim, else
    ``SignatureError``; several secrets (rotation) and several signatures are accepted."""
    check_inputs(body, now)
    # Our own misconfiguration first: with no usable key no request can pass, whatever it holds.
    keys = _active_keys(config, secrets, now)
    presented = PRESENT[config.scheme](config, headers)
    tolerance = config.tolerance_seconds
    if presented.timestamp is not None and (
        late := outside(now - int(presented.timestamp), tolerance, tolerance)
    ):
        raise SignatureError("timestamp outside tolerance", late)
    if not any(_signed_by(k, body, presented) for k in keys):
        raise SignatureMismatchError()


def outside(age: float, max_age: float, max_ahead: float) -> str | None:
    """Why a signed time ``age`` seconds old is outside ``[-max_ahead, max_age]``, else None:
    both ways, as a far-future one would otherwise stay replayable for longer."""
    if age > max_age:
        return f"more than {max_age} s old"
    return f"more than {max_ahead} s ahead" if -age > max_ahead else None


def _signed_by(key: bytes, body: bytes, presented: Presented) -> bool:
    """``key`` made one of the candidates, compared in constant time."""
    expected = mac(key, body, presented.timestamp, presented.msg_id)
    return any(hmac.compare_digest(expected, candidate) for candidate in presented.candidates)


def _active_keys(
    config: SignatureConfig, secrets: Iterable[WebhookSecret], now: float
) -> list[bytes]:
    """The keys of the secrets active at ``now``; ``NoValidSecretError`` when there is none;
    ``TypeError`` for anything but secrets in ``secrets`` (a str's characters included)."""
    keys = []
    for secret in secrets:
        if not isinstance(secret, WebhookSecret):
            raise TypeError("secrets must be an iterable of WebhookSecret")
        if secret.is_active(now):
            # One bad entry must not block the others during a rotation.
            with contextlib.suppress(ValueError):
                keys.append(key(config.scheme, secret.value))
    if not keys:
        raise NoValidSecretError("no unexpired, well-formed secret is configured")
    return keys


def check_inputs(body: bytes, now: float) -> None:
    """Raw bytes, and a finite time: the two inputs ``sign`` and ``verify`` refuse otherwise."""
    if not isinstance(body, bytes | bytearray):
        # A str body was already decoded (or is still base64): the caller must pass raw bytes.
        raise TypeError("body must be the raw request bytes")
    if not finite(now):  # NaN would make every tolerance and expiry comparison False, i.e. pass
        raise ValueError("now must be finite epoch seconds")
