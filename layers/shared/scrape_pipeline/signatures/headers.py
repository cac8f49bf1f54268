"""Reading what a request presents: header values, encoded signatures, timestamps.

Every problem is a ``SignatureError`` that names the header, never its value.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NamedTuple, cast

from scrape_pipeline.signatures.config import Encoding
from scrape_pipeline.signatures.errors import FailureReason, SignatureError

DIGEST_SIZE: Final = 32  # SHA-256
_HEX: Final = frozenset("0123456789abcdefABCDEF")
# Ten digits cover epoch seconds until the year 2286; a cap keeps int() cheap on junk.
_MAX_TIMESTAMP_DIGITS: Final = 12
# ASCII digits only: int() would also take "+1", "1_0", " 1" and non-ASCII digits.
_EPOCH_SECONDS: Final = re.compile(f"[0-9]{{1,{_MAX_TIMESTAMP_DIGITS}}}")


class Headers:
    """Header lookup in any case; two spellings with different values are ambiguous, not chosen."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def require(self, name: str) -> str:
        """The value of ``name`` without surrounding blanks, or ``SignatureError``."""
        wanted = name.lower()
        values = {v for k, v in self._headers.items() if isinstance(k, str) and k.lower() == wanted}
        distinct: list[object] = list(values)  # the rules below narrow it to one str
        for rule in _VALUE_RULES:
            if rule.broken(distinct):
                raise SignatureError(rule.reason, rule.detail.format(name=name))
        # RFC 9110: surrounding whitespace is not part of a field value.
        return cast(str, distinct[0]).strip(" \t")


class _Rule(NamedTuple):
    """``broken`` says whether a header's distinct values break it; ``detail`` is formatted with
    the header's ``name``, never its value."""

    broken: Callable[[Sequence[object]], bool]
    reason: FailureReason
    detail: str


# The first rule broken is raised; each may assume the ones before it hold.
_VALUE_RULES: Final = (
    _Rule(lambda values: not values, "missing header", "{name}"),
    _Rule(
        lambda values: len(values) > 1, "malformed header", "{name} appears with different values"
    ),
    _Rule(lambda values: not isinstance(values[0], str), "malformed header", "{name} is not text"),
    _Rule(
        lambda values: not cast(str, values[0]).strip(" \t"), "malformed header", "{name} is empty"
    ),
)


def prefixed_signature(headers: Headers, name: str, prefix: str, encoding: Encoding) -> list[bytes]:
    """The one signature of a header holding ``<prefix><encoded digest>``."""
    value = headers.require(name)
    if not value.startswith(prefix):
        raise SignatureError("malformed header", f"{name} lacks its prefix")
    return usable([decode(value[len(prefix) :], encoding)], name, "not a signature")


def usable(candidates: list[bytes | None], name: str, problem: str) -> list[bytes]:
    """The decodable candidates; a header with none left is malformed."""
    # Undecodable entries beside a good one are skipped (any valid signature suffices).
    found = list(filter(None, candidates))
    if not found:
        raise SignatureError("malformed header", f"{name}: {problem}")
    return found


def encode(digest: bytes, encoding: Encoding) -> str:
    """A digest as a sender writes it."""
    return _ENCODERS[encoding](digest)


def decode(text: str, encoding: Encoding) -> bytes | None:
    """The 32 signature bytes, or None when ``text`` is not exactly that in ``encoding``."""
    return _DECODERS[encoding](text)


def _from_hex(text: str) -> bytes | None:
    # bytes.fromhex alone would accept spaces between bytes; check the alphabet first.
    return bytes.fromhex(text) if len(text) == 2 * DIGEST_SIZE and set(text) <= _HEX else None


def _from_base64(text: str) -> bytes | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        return None
    return raw if len(raw) == DIGEST_SIZE else None


_ENCODERS: Final[Mapping[Encoding, Callable[[bytes], str]]] = {
    "hex": bytes.hex,
    "base64": lambda digest: base64.b64encode(digest).decode("ascii"),
}
_DECODERS: Final[Mapping[Encoding, Callable[[str], bytes | None]]] = {
    "hex": _from_hex,
    "base64": _from_base64,
}


def timestamp(text: str, name: str) -> str:
    """Integer epoch seconds exactly as sent, or ``SignatureError``."""
    if not _EPOCH_SECONDS.fullmatch(text):
        raise SignatureError("malformed header", f"{name} is not integer epoch seconds")
    return text  # signed as sent, so a sender's leading zeros still verify
