"""How deliveries are signed (``SignatureConfig``), its validation rules and its environment."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, cast

from scrape_pipeline.settings import SettingsError, read_choice, read_int, read_str


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
_SETTINGS_NAMES: Final = (
    "SIGNATURE_SCHEME",
    "SIGNATURE_HEADER",
    "SIGNATURE_ENCODING",
    "SIGNATURE_PREFIX",
    "SIGNATURE_TIMESTAMP_HEADER",
    "SIGNATURE_TOLERANCE_SECONDS",
)


@dataclass(frozen=True)
class SignatureConfig:
    """How deliveries are signed. ``None`` fields take the scheme's fixed or default value."""

    scheme: Scheme | SchemeName = Scheme.GEONODE
    header: str | None = None
    encoding: Encoding | None = None
    prefix: str = ""
    timestamp_header: str | None = None
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS

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
        """Read the ``SIGNATURE_*`` variables (package docstring); ``SettingsError`` if invalid."""

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
                scheme=Scheme(scheme),
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
