"""How deliveries are signed (``SignatureConfig``), its validation rules and its environment.

Its fields are the ``SIGNATURE_*`` settings' declarations (``scrape_pipeline.settings``): the
README's configuration table is rendered from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from scrape_pipeline.settings import (
    Kind,
    Setting,
    SettingsError,
    declared,
    integer,
    read_declared,
    text,
)


class Scheme(StrEnum):
    """The signature schemes ``verify`` knows (the package docstring describes each)."""

    GEONODE = "geonode"
    STANDARD_WEBHOOKS = "standard_webhooks"
    STRIPE = "stripe"
    GITHUB = "github"


# The spellings a caller may pass for ``SignatureConfig.scheme``; it is held as a ``Scheme``.
SchemeName = Literal["geonode", "standard_webhooks", "stripe", "github"]
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
# The published schemes that sign a timestamp; geonode does when it has a timestamp header.
_TIMESTAMPED: Final = frozenset({Scheme.STANDARD_WEBHOOKS, Scheme.STRIPE})
# RFC 9110 token characters: what a header name may contain.
_TCHAR: Final = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
_MAX_TOLERANCE_SECONDS: Final = 999_999_999  # nine digits: over 31 years
# Only geonode's format is unpublished; the other schemes fix their header, encoding and prefix.
_GEONODE_ONLY: Final = "geonode scheme only (its format is unpublished, so configurable)"


@dataclass(frozen=True)
class SignatureConfig:
    """How deliveries are signed. ``None`` fields take the scheme's fixed or default value."""

    # RUF009 cannot tell these annotations are immutable; ``.field()`` is a ``dataclasses.field``.
    scheme: Scheme | SchemeName = Setting(  # noqa: RUF009
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
    prefix: str = text(
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
        maximum=_MAX_TOLERANCE_SECONDS,
    ).field()

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown signature scheme {self.scheme!r}; expected one of {SCHEMES}")
        object.__setattr__(self, "scheme", Scheme(self.scheme))
        problem = _problem(self)
        if problem:
            raise ValueError(problem)

    @property
    def kind(self) -> Scheme:
        """The scheme as its enum (``scheme`` is one once constructed; this says so to mypy)."""
        return Scheme(self.scheme)

    @property
    def signature_header(self) -> str:
        """The header that carries the signature(s)."""
        return self.header or SIGNATURE_HEADER[self.kind]

    @property
    def signs_timestamp(self) -> bool:
        """The signed bytes include a timestamp that ``verify`` holds to the tolerance.

        When they do not (geonode without a timestamp header, github), a signature alone
        proves nothing about when the delivery was made: ``scrape_pipeline.freshness`` reads
        the time from the signed body instead.
        """
        if self.kind is Scheme.GEONODE:
            return self.timestamp_header is not None
        return self.kind in _TIMESTAMPED

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SignatureConfig:
        """Read the ``SIGNATURE_*`` declarations; ``SettingsError`` for a value that does not
        parse, or for values that break a rule below together."""
        values = read_declared(cls, environ)
        try:
            return cls(**values)
        except ValueError as exc:
            names = [s.name for s in declared(cls).values()]
            raise SettingsError(f"invalid SIGNATURE_* settings: {exc}", names=names) from exc


# --- validation: a table of rules; the first one broken is raised as ValueError ------------


def _valid_header_name(name: str | None) -> bool:
    return name is None or bool(name and set(name) <= _TCHAR)


def _printable_ascii(prefix: object) -> bool:
    return isinstance(prefix, str) and prefix.isascii() and prefix.isprintable()


def _tolerance_disabled(config: SignatureConfig) -> bool:
    tolerance = config.tolerance_seconds
    return isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance <= 0


@dataclass(frozen=True)
class _Rule:
    """``broken`` says whether a configuration breaks it; ``message`` is formatted with
    ``scheme``, ``header``, ``timestamp_header`` and ``encoding`` (``_problem``)."""

    broken: Callable[[SignatureConfig], bool]
    message: str


# Stripe's library skips the check when tolerance is falsy; here 0 is a mistake.
_TOLERANCE: Final = _Rule(
    _tolerance_disabled, "tolerance_seconds must be a positive integer; it cannot be disabled"
)
# The published schemes fix these; a setting that is silently ignored hides a typo.
_FIXED_RULES: Final = (
    _TOLERANCE,
    _Rule(
        lambda c: c.header is not None or c.encoding is not None,
        "scheme {scheme!r} fixes its header and encoding",
    ),
    _Rule(
        lambda c: bool(c.prefix) or c.timestamp_header is not None,
        "scheme {scheme!r} fixes its prefix and timestamp",
    ),
)
_CONFIGURABLE_RULES: Final = (
    _TOLERANCE,
    _Rule(
        lambda c: not _valid_header_name(c.header),
        "header name {header!r} is not a valid HTTP header name",
    ),
    _Rule(
        lambda c: not _valid_header_name(c.timestamp_header),
        "header name {timestamp_header!r} is not a valid HTTP header name",
    ),
    _Rule(
        lambda c: c.encoding is not None and c.encoding not in ENCODINGS,
        "unknown encoding {encoding!r}; expected one of " + str(ENCODINGS),
    ),
    _Rule(lambda c: not _printable_ascii(c.prefix), "prefix must be printable ASCII"),
    _Rule(lambda c: any(ch.isspace() for ch in c.prefix), "prefix must not contain whitespace"),
    _Rule(
        lambda c: (
            c.timestamp_header is not None
            and c.timestamp_header.lower() == c.signature_header.lower()
        ),
        "timestamp_header must differ from the signature header",
    ),
)


def _problem(config: SignatureConfig) -> str | None:
    """The message of the first rule ``config`` breaks; only geonode's settings are its own."""
    rules = _CONFIGURABLE_RULES if config.kind is Scheme.GEONODE else _FIXED_RULES
    for rule in rules:
        if rule.broken(config):
            return rule.message.format(
                scheme=config.kind.value,
                header=config.header,
                timestamp_header=config.timestamp_header,
                encoding=config.encoding,
            )
    return None
