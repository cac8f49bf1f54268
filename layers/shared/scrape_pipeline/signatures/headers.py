"""Reading what a request presents: header values, encoded signatures, timestamps.

Every problem is a ``SignatureError`` that names the header, never its value.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Final

from scrape_pipeline.signatures.config import Encoding
from scrape_pipeline.signatures.errors import SignatureError

DIGEST_SIZE: Final = 32  # SHA-256
_HEX: Final = frozenset("0123456789abcdefABCDEF")
# Ten digits cover epoch seconds until the year 2286; a cap keeps int() cheap on junk.
_MAX_TIMESTAMP_DIGITS: Final = 12


class Headers:
    """Header lookup in any case; two spellings with different values are ambiguous, not chosen."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def require(self, name: str) -> str:
        """The value of ``name`` without surrounding blanks, or ``SignatureError``."""
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


def prefixed_signature(headers: Headers, name: str, prefix: str, encoding: Encoding) -> list[bytes]:
    """The one signature of a header holding ``<prefix><encoded digest>``."""
    value = headers.require(name)
    if not value.startswith(prefix):
        raise SignatureError("malformed header", f"{name} lacks its prefix")
    return usable([decode(value[len(prefix) :], encoding)], name, "not a signature")


def usable(candidates: list[bytes | None], name: str, problem: str) -> list[bytes]:
    """The decodable candidates; a header with none left is malformed."""
    # Undecodable entries beside a good one are skipped (any valid signature suffices).
    found = [c for c in candidates if c is not None]
    if not found:
        raise SignatureError("malformed header", f"{name}: {problem}")
    return found


def encode(digest: bytes, encoding: Encoding) -> str:
    """A digest as a sender writes it."""
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode("ascii")


def decode(text: str, encoding: Encoding) -> bytes | None:
    """The 32 signature bytes, or None when ``text`` is not exactly that in ``encoding``."""
    if encoding == "hex":
        # bytes.fromhex alone would accept spaces between bytes; check the alphabet first.
        if len(text) != 2 * DIGEST_SIZE or not set(text) <= _HEX:
            return None
        return bytes.fromhex(text)
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        return None
    return raw if len(raw) == DIGEST_SIZE else None


def timestamp(text: str, name: str) -> str:
    """Integer epoch seconds exactly as sent, or ``SignatureError``."""
    # ASCII digits only: int() would also take "+1", "1_0", " 1" and non-ASCII digits.
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_TIMESTAMP_DIGITS):
        raise SignatureError("malformed header", f"{name} is not integer epoch seconds")
    return text  # signed as sent, so a sender's leading zeros still verify
