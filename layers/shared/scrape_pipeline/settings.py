"""Every setting the runtime takes from the environment: declared once, read one way.

A setting is a ``Setting``: its variable, its default, why it has that default, and how it
parses. A settings class is a frozen dataclass beside the code it configures whose fields are
declarations (``lease_seconds: float = number("LEASE_SECONDS", 120.0, "why").field()``);
``FromEnv.from_env`` reads every one of them. The README's configuration table is rendered from
the declarations (``scrape_pipeline_ops.configuration`` lists them in its order and renders it),
so a docstring names the declarations instead of repeating them:

    GeonodeSettings       here                       GEONODE_* (the API client and its key)
    LedgerSettings        scrape_pipeline.resources  the ledger table, LEDGER_TTL_DAYS, MAX_REOPENS;
                                                     QUEUE_URL and RESULTS_BUCKET beside it
    ReceiverSettings      scrape_pipeline.receiver   the receiver Lambda
    FieldLocations        scrape_pipeline.payload    *_FIELDS: where the job, attempt and time are
    Freshness             scrape_pipeline.freshness  WEBHOOK_MAX_AGE_SECONDS
    ProcessorSettings     scrape_pipeline.processor_settings  the processor Lambda
    RecoverySettings      scrape_pipeline.recovery   STALE_AFTER_SECONDS
    SignatureConfig       scrape_pipeline.signatures SIGNATURE_*
    ReconcilerSettings    scrape_pipeline.reconciler the reconciler Lambda

An unset or empty variable takes its default (SAM parameters default to ""). A bad value raises
``SettingsError`` naming the variable and the value: a number that does not parse, is not
finite or is below its minimum, an integer given as "2.5", a word outside its choices. Nothing
is truncated or clamped silently. Every value the Geonode documentation does not publish is a
setting (docs/geonode-api.md).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple, Self, cast

from scrape_pipeline.errors import PipelineError

DEFAULT_BASE_URL = "https://scraper.geonode.io"
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Where a dataclass field keeps its declaration (``dataclasses.Field.metadata``).
_DECLARATION: Final = "scrape_pipeline.setting"


class SettingsError(PipelineError, ValueError):
    """A setting is missing or malformed; ``names`` are the variables, ``value`` the bad value."""

    def __init__(self, message: str, *, names: Sequence[str], value: str | None = None) -> None:
        super().__init__(message)
        self.names = tuple(names)
        self.value = value


def _bad(name: str, problem: str, raw: str) -> SettingsError:
    return SettingsError(f"{name} {problem}, got {raw!r}", names=(name,), value=raw)


def _raw(env: Mapping[str, str], name: str) -> str | None:
    """The value, stripped; None when unset or empty (both mean "the default")."""
    return env.get(name, "").strip() or None


def _read[T](env: Mapping[str, str], name: str, default: T, parse: Callable[[str], T]) -> T:
    """``parse`` of the value when there is one, else ``default``: every reader's one path."""
    raw = _raw(env, name)
    return default if raw is None else parse(raw)


def require(env: Mapping[str, str], *names: str) -> tuple[str, ...]:
    """Settings without a default; one ``SettingsError`` names every one that is missing."""
    values = tuple(_raw(env, n) for n in names)
    missing = [n for n, v in zip(names, values, strict=True) if v is None]
    if missing:
        raise SettingsError(f"missing settings: {', '.join(missing)}", names=missing)
    return cast("tuple[str, ...]", values)  # none is None any more


def read_str(env: Mapping[str, str], name: str, default: str) -> str:
    """``env[name]`` stripped of surrounding spaces, ``default`` when unset or empty."""
    return _read(env, name, default, str)


def read_choice(env: Mapping[str, str], name: str, default: str, choices: Sequence[str]) -> str:
    """``env[name]`` in lower case, which must be one of ``choices``."""
    return _read(env, name, default, lambda raw: _one_of(name, raw, choices))


def _one_of(name: str, raw: str, choices: Sequence[str]) -> str:
    value = raw.lower()
    if value not in choices:
        raise _bad(name, f"must be one of {', '.join(choices)}", raw)
    return value


def read_list(env: Mapping[str, str], name: str, default: Sequence[str]) -> tuple[str, ...]:
    """``env[name]`` as comma-separated items (empty items dropped), ``default`` when none."""
    return _items(env.get(name, "")) or tuple(default)


def _items(raw: str) -> tuple[str, ...]:
    return tuple(filter(None, map(str.strip, raw.split(","))))


def read_float(
    env: Mapping[str, str], name: str, default: float, *, minimum: float | None = None
) -> float:
    """``env[name]`` as a finite number: positive, or at least ``minimum`` when one is given."""
    return _read(env, name, default, lambda raw: _REAL.parse(name, raw, minimum, None))


def read_int(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    minimum: int = 1,
    maximum: int | None = None,
) -> int:
    """``env[name]`` as a whole number in ``[minimum, maximum]``; "2.5" or "1e3" is an error."""
    return _read(env, name, default, lambda raw: _WHOLE.parse(name, raw, minimum, maximum))


class _Limit(NamedTuple):
    """A rule a parsed number keeps: ``broken(value, minimum, maximum)`` says it does not, and
    ``problem`` (formatted with ``minimum`` and ``maximum``) says why."""

    broken: Callable[[Any, Any, Any], bool]
    problem: str


@dataclass(frozen=True)
class _Numbers[N: (int, float)]:
    """One kind of number: how its text converts (None: it is not one) and the limits, in the
    order they are checked; the first, on None, is the conversion's own."""

    convert: Callable[[str], N | None]
    limits: tuple[_Limit, ...]

    def parse(self, name: str, raw: str, minimum: N | None, maximum: N | None) -> N:
        """``raw`` as a number within the limits, or ``SettingsError`` naming the first broken."""
        value = self.convert(raw)
        for limit in self.limits:
            if limit.broken(value, minimum, maximum):
                problem = limit.problem.format(minimum=minimum, maximum=maximum)
                raise _bad(name, problem, raw)
        return cast(N, value)  # the first limit refused None


def _to_float(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def _to_int(raw: str) -> int | None:
    # Digits only: int() alone would also take "1_000" and non-ASCII digits.
    if not _INTEGER.fullmatch(raw):
        return None
    try:
        return int(raw)
    except ValueError:  # more digits than int() parses
        return None


_REAL: Final = _Numbers(
    _to_float,
    (
        _Limit(lambda v, lo, hi: v is None, "must be a number"),
        _Limit(lambda v, lo, hi: not math.isfinite(v), "must be a finite number"),
        # Without a minimum a number is a duration or a size: zero is not one.
        _Limit(lambda v, lo, hi: lo is None and v <= 0, "must be positive"),
        _Limit(lambda v, lo, hi: lo is not None and v < lo, "must be at least {minimum:g}"),
    ),
)
_WHOLE: Final = _Numbers(
    _to_int,
    (
        _Limit(lambda v, lo, hi: v is None, "must be an integer"),
        _Limit(lambda v, lo, hi: lo == 1 and v < 1, "must be positive"),
        _Limit(lambda v, lo, hi: v < lo, "must be at least {minimum}"),
        _Limit(lambda v, lo, hi: hi is not None and v > hi, "must be at most {maximum}"),
    ),
)


class Kind(StrEnum):
    """How a setting's text parses (``_PARSE`` below: the same parsers as the readers above)."""

    TEXT = "text"  # read_str
    URL = "url"  # read_str, without a trailing "/"
    CHOICE = "choice"  # read_choice: one of ``choices``, any case
    LIST = "list"  # read_list: comma-separated items
    NUMBER = "number"  # read_float: positive, or at least ``minimum``
    INTEGER = "integer"  # read_int: at least ``minimum`` (1), at most ``maximum``


@dataclass(frozen=True)
class Setting[T]:
    """One environment variable: its name, its default, why, and how it parses.

    ``required``: no default, whoever reads it needs it (``require``'s error). ``off``: a word
    (any case) an integer setting takes to mean None, no limit.
    """

    name: str
    default: T
    reason: str
    kind: Kind = Kind.TEXT
    minimum: float | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    off: str | None = None
    required: bool = False

    def read(self, env: Mapping[str, str]) -> T:
        """The value in ``env``, or the default; ``SettingsError`` naming the variable."""
        if self.required:
            (value,) = require(env, self.name)
            return cast(T, value)
        return _read(
            env, self.name, self.default, lambda raw: cast(T, _PARSE[self.kind](self, raw))
        )

    def field(self) -> T:
        """A dataclass field declared by this setting (its default is the setting's)."""
        metadata = {_DECLARATION: self}
        if self.required:
            return cast(T, dataclasses.field(metadata=metadata))
        return dataclasses.field(default=self.default, metadata=metadata)


def _whole(setting: Setting[Any], raw: str) -> int | None:
    """An integer setting's value: None for its ``off`` word, else a whole number."""
    if raw.lower() == setting.off:
        return None
    minimum = 1 if setting.minimum is None else int(setting.minimum)
    return _WHOLE.parse(setting.name, raw, minimum, setting.maximum)


# How each kind parses a value that is set (an unset one is the default before any of these).
_PARSE: Final[Mapping[Kind, Callable[[Setting[Any], str], object]]] = {
    Kind.TEXT: lambda setting, raw: raw,
    Kind.URL: lambda setting, raw: raw.rstrip("/"),
    Kind.CHOICE: lambda setting, raw: _one_of(setting.name, raw, setting.choices),
    Kind.LIST: lambda setting, raw: _items(raw) or tuple(setting.default),
    Kind.NUMBER: lambda setting, raw: _REAL.parse(setting.name, raw, setting.minimum, None),
    Kind.INTEGER: _whole,
}


def text(name: str, default: str, reason: str) -> Setting[str]:
    """A string, stripped of surrounding spaces."""
    return Setting(name, default, reason)


def required(name: str, reason: str) -> Setting[str]:
    """A string without a default: a resource's name the stack gives."""
    return Setting(name, "", reason, required=True)


def number(
    name: str, default: float, reason: str, *, minimum: float | None = None
) -> Setting[float]:
    """A finite number, positive or at least ``minimum``."""
    return Setting(name, default, reason, Kind.NUMBER, minimum=minimum)


def integer(
    name: str, default: int, reason: str, *, minimum: int = 1, maximum: int | None = None
) -> Setting[int]:
    """A whole number in ``[minimum, maximum]``."""
    return Setting(name, default, reason, Kind.INTEGER, minimum=minimum, maximum=maximum)


def paths(name: str, default: tuple[str, ...], reason: str) -> Setting[tuple[str, ...]]:
    """Comma-separated items (dotted field paths)."""
    return Setting(name, default, reason, Kind.LIST)


def declared(cls: type) -> dict[str, Setting[Any]]:
    """The settings a dataclass's fields declare, by field name, in field order."""
    fields = dataclasses.fields(cls)
    return {f.name: f.metadata[_DECLARATION] for f in fields if _DECLARATION in f.metadata}


def read_declared(cls: type, env: Mapping[str, str]) -> dict[str, Any]:
    """Every declared field of ``cls`` read from ``env``: one error names every required one
    missing, then each value is read in field order."""
    settings = declared(cls)
    require(env, *(s.name for s in settings.values() if s.required))
    return {name: setting.read(env) for name, setting in settings.items()}


class FromEnv:
    """A settings dataclass whose fields are all declarations; ``from_env`` reads them all."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """Read the settings from ``env`` (default: the process environment); ``SettingsError``."""
        return cls(**read_declared(cls, os.environ if env is None else env))


# The key is not part of GeonodeSettings: ``api_key`` reads one or the other.
GEONODE_SCRAPER_API_KEY = text(
    "GEONODE_SCRAPER_API_KEY",
    "",
    "the API key for the CLI and local runs; never logged, never in an error",
)
GEONODE_API_KEY_SECRET_ID = text(
    "GEONODE_API_KEY_SECRET_ID",
    "",
    "where the Lambdas read the key (Secrets Manager, cached 5 min); one of the two is required",
)
# The Lambdas build their clients with retry policies of their own (wiring).
_RETRIES = "same clients as `GEONODE_RETRY_MAX_ATTEMPTS`"


# Declared here, beside the client's settings, because the submitter, the processor and the
# CLI all read it (``scrape_pipeline.listing_lag``).
LISTING_LAG_FLOOR = number(
    "GEONODE_LISTING_LAG_FLOOR_SECONDS",
    300.0,
    "the least listing lag allowed for: a POST whose answer was lost is posted again only once "
    "a job-list look-up made this long after it (or twice the lag the reconciler measured, if "
    "more) found nothing. The API lists jobs minutes late at times; waiting costs a lost "
    "answer's entry minutes, a re-post too early pays for the URL twice",
    minimum=0,
)


@dataclass(frozen=True)
class GeonodeSettings(FromEnv):
    """How to reach the Geonode Scraper API (the declarations are the documentation)."""

    base_url: str = Setting(
        "GEONODE_BASE_URL", DEFAULT_BASE_URL, "point it at the simulator locally", Kind.URL
    ).field()
    timeout_seconds: float = number(
        "GEONODE_TIMEOUT_SECONDS", 30.0, "a sync extract may render JavaScript"
    ).field()
    listing_lag_floor_s: float = LISTING_LAG_FLOOR.field()
    retry_max_attempts: int = integer(
        "GEONODE_RETRY_MAX_ATTEMPTS",
        6,
        "attempts at one API call of a client built without a retry policy of its own: the "
        "operator CLI's own calls and scripts using the library. Not the Lambdas': the processor "
        "never retries within a call (`NO_RETRY`: the job's message comes back later), and the "
        "reconciler, with the CLI commands that run it, uses `wiring.RECONCILER_RETRY`. Reads "
        "are retried after 429, 5xx and network errors, exponential with full jitter, "
        "`Retry-After` honoured; creations only when the API certainly did not act (429, no "
        "connection)",
    ).field()
    retry_base_delay: float = number(
        "GEONODE_RETRY_BASE_DELAY_SECONDS",
        0.5,
        f"the first backoff's ceiling, doubled at each retry ({_RETRIES})",
    ).field()
    retry_max_delay: float = number(
        "GEONODE_RETRY_MAX_DELAY_SECONDS", 20.0, f"the longest backoff ({_RETRIES})"
    ).field()
    retry_deadline: float = number(
        "GEONODE_RETRY_DEADLINE_SECONDS",
        60.0,
        f"the most time one call spends retrying ({_RETRIES})",
    ).field()
