"""One reader for every setting the runtime takes from the environment.

Each settings class is a frozen dataclass beside the code it configures, and its docstring is
the table of its variables, defaults and reasons; every one reads the environment through the
functions here, so every setting is parsed and checked the same way:

    GeonodeSettings       here                       GEONODE_* (the API client)
    ReceiverSettings      scrape_pipeline.receiver   the receiver Lambda
    SignatureConfig       scrape_pipeline.signatures SIGNATURE_*
    Freshness             scrape_pipeline.freshness  WEBHOOK_MAX_AGE_SECONDS
    FieldLocations        scrape_pipeline.payload    *_FIELDS: where the job, attempt and time are
    ProcessorSettings     scrape_pipeline.processing the processor Lambda
    ReconcilerSettings    scrape_pipeline.reconciler the reconciler Lambda (and its sweeps')
    the wiring            scrape_pipeline.wiring     table, queue, bucket names; LEDGER_TTL_DAYS,
                                                     MAX_REOPENS

An unset or empty variable takes its default (SAM parameters default to ""). A bad value raises
``SettingsError`` naming the variable and the value: a number that does not parse, is not
finite or is below its minimum, an integer given as "2.5", a word outside its choices. Nothing
is truncated or clamped silently. Every value the Geonode documentation does not publish is a
setting (geonode-api.md).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scrape_pipeline.errors import PipelineError

DEFAULT_BASE_URL = "https://scraper.geonode.io"
_INTEGER = re.compile(r"[+-]?[0-9]+")


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
    value = env.get(name)
    if value is None:
        return None
    return value.strip() or None


def require(env: Mapping[str, str], *names: str) -> tuple[str, ...]:
    """Settings without a default; one ``SettingsError`` names every one that is missing."""
    values = [_raw(env, n) for n in names]
    missing = [n for n, v in zip(names, values, strict=True) if v is None]
    if missing:
        raise SettingsError(f"missing settings: {', '.join(missing)}", names=missing)
    return tuple(v for v in values if v is not None)


def read_str(env: Mapping[str, str], name: str, default: str) -> str:
    """``env[name]`` stripped of surrounding spaces, ``default`` when unset or empty."""
    raw = _raw(env, name)
    return default if raw is None else raw


def read_choice(env: Mapping[str, str], name: str, default: str, choices: Sequence[str]) -> str:
    """``env[name]`` in lower case, which must be one of ``choices``."""
    raw = _raw(env, name)
    if raw is None:
        return default
    value = raw.lower()
    if value not in choices:
        raise _bad(name, f"must be one of {', '.join(choices)}", raw)
    return value


def read_list(env: Mapping[str, str], name: str, default: Sequence[str]) -> tuple[str, ...]:
    """``env[name]`` as comma-separated items (empty items dropped), ``default`` when none."""
    items = tuple(p.strip() for p in (env.get(name) or "").split(",") if p.strip())
    return items or tuple(default)


def read_float(
    env: Mapping[str, str], name: str, default: float, *, minimum: float | None = None
) -> float:
    """``env[name]`` as a finite number: positive, or at least ``minimum`` when one is given."""
    raw = _raw(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise _bad(name, "must be a number", raw) from None
    if not math.isfinite(value):
        raise _bad(name, "must be a finite number", raw)
    if minimum is None and value <= 0:
        raise _bad(name, "must be positive", raw)
    if minimum is not None and value < minimum:
        raise _bad(name, f"must be at least {minimum:g}", raw)
    return value


def read_int(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    minimum: int = 1,
    maximum: int | None = None,
) -> int:
    """``env[name]`` as a whole number in ``[minimum, maximum]``; "2.5" or "1e3" is an error."""
    raw = _raw(env, name)
    if raw is None:
        return default
    try:
        # Digits only: int() alone would also take "1_000" and non-ASCII digits.
        value = int(raw) if _INTEGER.fullmatch(raw) else None
    except ValueError:  # more digits than int() parses
        value = None
    if value is None:
        raise _bad(name, "must be an integer", raw)
    if value < minimum:
        raise _bad(name, "must be positive" if minimum == 1 else f"must be at least {minimum}", raw)
    if maximum is not None and value > maximum:
        raise _bad(name, f"must be at most {maximum}", raw)
    return value


@dataclass(frozen=True)
class GeonodeSettings:
    """How to reach the Geonode Scraper API.

    | variable | default | why |
    |---|---|---|
    | GEONODE_BASE_URL | https://scraper.geonode.io | point it at the simulator locally |
    | GEONODE_TIMEOUT_SECONDS | 30 | a sync extract may render JavaScript |
    | GEONODE_RETRY_MAX_ATTEMPTS | 6 | transient errors: 429, 5xx, network |
    | GEONODE_RETRY_BASE_DELAY_SECONDS | 0.5 | first backoff ceiling, doubled each try |
    | GEONODE_RETRY_MAX_DELAY_SECONDS | 20 | cap of one backoff |
    | GEONODE_RETRY_DEADLINE_SECONDS | 60 | total time one call may spend retrying |

    The API key is not a setting: it comes from ``GEONODE_SCRAPER_API_KEY`` or a secret store.
    """

    base_url: str = DEFAULT_BASE_URL
    timeout_seconds: float = 30.0
    retry_max_attempts: int = 6
    retry_base_delay: float = 0.5
    retry_max_delay: float = 20.0
    retry_deadline: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GeonodeSettings:
        """Read the settings from ``env`` (default: the process environment); ``SettingsError``."""
        env = os.environ if env is None else env
        return cls(
            base_url=read_str(env, "GEONODE_BASE_URL", DEFAULT_BASE_URL).rstrip("/"),
            timeout_seconds=read_float(env, "GEONODE_TIMEOUT_SECONDS", cls.timeout_seconds),
            retry_max_attempts=read_int(env, "GEONODE_RETRY_MAX_ATTEMPTS", cls.retry_max_attempts),
            retry_base_delay=read_float(
                env, "GEONODE_RETRY_BASE_DELAY_SECONDS", cls.retry_base_delay
            ),
            retry_max_delay=read_float(env, "GEONODE_RETRY_MAX_DELAY_SECONDS", cls.retry_max_delay),
            retry_deadline=read_float(env, "GEONODE_RETRY_DEADLINE_SECONDS", cls.retry_deadline),
        )
