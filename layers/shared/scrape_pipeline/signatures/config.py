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
        for rule in _rules_for(self.kind):
            problem = rule(self)
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


# --- validation: each rule returns what is wrong, or None; the first problem is raised -------

_Rule = Callable[[SignatureConfig], str | None]


def _tolerance_disabled(config: SignatureConfig) -> str | None:
    tolerance = config.tolerance_seconds
    if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance <= 0:
        # Stripe's library skips the check when tolerance is falsy; here 0 is a mistake.
        return "tolerance_seconds must be a positive integer; it cannot be disabled"
    return None


# The published schemes fix these; a setting that is silently ignored hides a typo.
def _fixed_header_set(config: SignatureConfig) -> str | None:
    if config.header is not None or config.encoding is not None:
        return f"scheme {config.kind.value!r} fixes its header and encoding"
    return None


def _fixed_prefix_set(config: SignatureConfig) -> str | None:
    if config.prefix or config.timestamp_header is not None:
        return f"scheme {config.kind.value!r} fixes its prefix and timestamp"
    return None


def _bad_header_name(config: SignatureConfig) -> str | None:
    for name in (config.header, config.timestamp_header):
        if name is not None and not (name and set(name) <= _TCHAR):
            return f"header name {name!r} is not a valid HTTP header name"
    return None


def _unknown_encoding(config: SignatureConfig) -> str | None:
    if config.encoding is not None and config.encoding not in ENCODINGS:
        return f"unknown encoding {config.encoding!r}; expected one of {ENCODINGS}"
    return None


def _unprintable_prefix(config: SignatureConfig) -> str | None:
    prefix = config.prefix
    if not isinstance(prefix, str) or not (prefix.isascii() and prefix.isprintable()):
        return "prefix must be printable ASCII"
    return None


def _spaced_prefix(config: SignatureConfig) -> str | None:
    if any(c.isspace() for c in config.prefix):
        return "prefix must not contain whitespace"
    return None


def _timestamp_header_is_signature_header(config: SignatureConfig) -> str | None:
    name = config.timestamp_header
    if name is not None and name.lower() == config.signature_header.lower():
        return "timestamp_header must differ from the signature header"
    return None


_FIXED_RULES: Final[tuple[_Rule, ...]] = (
    _tolerance_disabled,
    _fixed_header_set,
    _fixed_prefix_set,
)
_CONFIGURABLE_RULES: Final[tuple[_Rule, ...]] = (
    _tolerance_disabled,
    _bad_header_name,
    _unknown_encoding,
    _unprintable_prefix,
    _spaced_prefix,
    _timestamp_header_is_signature_header,
)


def _rules_for(scheme: Scheme) -> tuple[_Rule, ...]:
    """Only geonode's header, encoding, prefix and timestamp are configuration."""
    return _CONFIGURABLE_RULES if scheme is Scheme.GEONODE else _FIXED_RULES
