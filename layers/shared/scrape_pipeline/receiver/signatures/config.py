"""How deliveries are signed (``SignatureConfig``): its ``SIGNATURE_*`` declarations and rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from scrape_pipeline.config.settings import (
    Kind,
    Setting,
    SettingsError,
    declared,
    integer,
    read_declared,
)
from scrape_pipeline.receiver.signatures.secret import first_broken


class Scheme(StrEnum):
    """The signature schemes ``verify`` knows (docs/security.md describes each)."""

    GEONODE = "geonode"
    STANDARD_WEBHOOKS = "standard_webhooks"
    STRIPE = "stripe"
    GITHUB = "github"


Encoding = Literal["hex", "base64"]

SCHEMES: Final[tuple[str, ...]] = tuple(s.value for s in Scheme)
ENCODINGS: Final[tuple[Encoding, ...]] = ("hex", "base64")
DEFAULT_TOLERANCE_SECONDS: Final = 300

SIGNATURE_HEADER: Final[Mapping[Scheme, str]] = {
    Scheme.GEONODE: "X-Webhook-Signature",
    Scheme.STANDARD_WEBHOOKS: "webhook-signature",
    Scheme.STRIPE: "Stripe-Signature",
    Scheme.GITHUB: "X-Hub-Signature-256",
}
# RFC 9110 token characters: what a header name may contain.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Only geonode's format is unpublished; the other schemes fix their header, encoding and prefix.
_GEONODE_ONLY: Final = "geonode scheme only (its format is unpublished, so configurable)"


@dataclass(frozen=True)
class SignatureConfig:
    """How deliveries are signed. ``None`` fields take the scheme's fixed or default value."""

    # RUF009 cannot tell these annotations are immutable; ``.field()`` is a ``dataclasses.field``.
    scheme: Scheme = Setting(  # noqa: RUF009
        "SIGNATURE_SCHEME",
        Scheme.GEONODE,
        "`geonode`, `standard_webhooks`, `stripe` or `github`",
        Kind.CHOICE,
        choices=SCHEMES,
    ).field()
    header: str | None = Setting[str | None](
        "SIGNATURE_HEADER",
        None,
        f"{_GEONODE_ONLY}: the header that carries the signature; unset: `X-Webhook-Signature`",
    ).field()
    encoding: Encoding | None = Setting[Encoding | None](  # noqa: RUF009
        "SIGNATURE_ENCODING",
        None,
        f"{_GEONODE_ONLY}: `hex` or `base64`; unset: `hex`",
        Kind.CHOICE,
        choices=ENCODINGS,
    ).field()
    prefix: str = Setting(
        "SIGNATURE_PREFIX",
        "",
        f"{_GEONODE_ONLY}: the text before the encoded signature, e.g. `sha256=`",
    ).field()
    timestamp_header: str | None = Setting[str | None](
        "SIGNATURE_TIMESTAMP_HEADER",
        None,
        "geonode scheme: the header of the timestamp the sender signs as `timestamp.body`; "
        "unset: the body alone is signed",
    ).field()
    tolerance_seconds: int = integer(
        "SIGNATURE_TOLERANCE_SECONDS",
        DEFAULT_TOLERANCE_SECONDS,
        "timestamped schemes: reject a timestamp older or newer than this; cannot be switched off",
        maximum=999_999_999,
    ).field()

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown signature scheme {self.scheme!r}; expected one of {SCHEMES}")
        object.__setattr__(self, "scheme", Scheme(self.scheme))  # from_env reads it as text
        if (message := first_broken(self, _RULES[self.scheme])) is not None:
            raise ValueError(message.format(c=self, scheme=self.scheme.value))

    @property
    def signature_header(self) -> str:
        """The header that carries the signature(s)."""
        return self.header or SIGNATURE_HEADER[self.scheme]

    @property
    def signs_timestamp(self) -> bool:
        """The signed bytes include a timestamp ``verify`` checks (only geonode may name its
        header); when not, ``freshness`` reads the time from the signed body instead."""
        timestamped = (Scheme.STANDARD_WEBHOOKS, Scheme.STRIPE)
        return self.timestamp_header is not None or self.scheme in timestamped

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SignatureConfig:
        """Read the ``SIGNATURE_*`` declarations; ``SettingsError`` for a value that does not
        parse, or for values that break a rule together."""
        values = read_declared(cls, environ)
        try:
            return cls(**values)
        except ValueError as exc:
            names = [s.name for s in declared(cls).values()]
            raise SettingsError(f"invalid SIGNATURE_* settings: {exc}", names=names) from exc


def _bad_name(name: str | None) -> bool:
    return name is not None and not _TOKEN.fullmatch(name)


# What a configuration must keep, in order; the first broken is the ValueError, its message
# formatted with the configuration ``c`` and its ``scheme``.
_Rules = tuple[tuple[Callable[[SignatureConfig], bool], str], ...]
_TOLERANCE: Final[_Rules] = (
    # Stripe's library skips the check when tolerance is falsy; here 0 is a mistake.
    (
        lambda c: (
            not isinstance(c.tolerance_seconds, int)
            or isinstance(c.tolerance_seconds, bool)
            or c.tolerance_seconds <= 0
        ),
        "tolerance_seconds must be a positive integer; it cannot be disabled",
    ),
)
# The published schemes fix these; a setting that is silently ignored hides a typo.
_FIXED: Final[_Rules] = (
    *_TOLERANCE,
    (
        lambda c: (c.header, c.encoding, c.prefix, c.timestamp_header) != (None, None, "", None),
        "scheme {scheme!r} fixes its header, encoding, prefix and timestamp",
    ),
)
_CONFIGURABLE: Final[_Rules] = (
    *_TOLERANCE,
    (
        lambda c: _bad_name(c.header) or _bad_name(c.timestamp_header),
        "header name {c.header!r} or {c.timestamp_header!r} is not a valid HTTP header name",
    ),
    (
        lambda c: c.encoding is not None and c.encoding not in ENCODINGS,
        "unknown encoding {c.encoding!r}; expected one of " + str(ENCODINGS),
    ),
    (
        lambda c: (
            not (isinstance(c.prefix, str) and c.prefix.isascii() and c.prefix.isprintable())
            or " " in c.prefix
        ),
        "prefix must be printable ASCII without whitespace",
    ),
    (
        lambda c: (c.timestamp_header or "").lower() == c.signature_header.lower(),
        "timestamp_header must differ from the signature header",
    ),
)
# Each scheme's rules: only geonode's format is configurable.
_RULES: Final[Mapping[Scheme, _Rules]] = {s: _FIXED for s in Scheme} | {
    Scheme.GEONODE: _CONFIGURABLE
}
