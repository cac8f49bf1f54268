"""Every setting the runtime reads, declared once as a dataclass field (docs/configuration.md
is rendered from them); unset or empty is the default, a bad value a ``SettingsError``."""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Self, cast

from scrape_pipeline.errors import PipelineError

_INTEGER = re.compile(r"[+-]?[0-9]+")  # int() alone also takes "1_000" and non-ASCII digits
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


def require(env: Mapping[str, str], *names: str) -> tuple[str, ...]:
    """Settings without a default; one ``SettingsError`` names every one that is missing."""
    values = tuple(env.get(n, "").strip() for n in names)
    missing = [n for n, v in zip(names, values, strict=True) if not v]
    if missing:
        raise SettingsError(f"missing settings: {', '.join(missing)}", names=missing)
    return values


# A number's limits, checked in order; the first broken is the error (``problem`` is formatted
# with ``minimum`` and ``maximum``). The first refuses text that did not convert (None).
_Limits = tuple[tuple[Callable[[Any, Any, Any], bool], str], ...]
_REAL: Final[_Limits] = (
    (lambda v, lo, hi: v is None, "must be a number"),
    (lambda v, lo, hi: not math.isfinite(v), "must be a finite number"),
    # Without a minimum a number is a duration or a size: zero is not one.
    (lambda v, lo, hi: lo is None and v <= 0, "must be positive"),
    (lambda v, lo, hi: lo is not None and v < lo, "must be at least {minimum:g}"),
)
_WHOLE: Final[_Limits] = (
    (lambda v, lo, hi: v is None, "must be an integer"),
    (lambda v, lo, hi: lo == 1 and v < 1, "must be positive"),
    (lambda v, lo, hi: v < lo, "must be at least {minimum}"),
    (lambda v, lo, hi: hi is not None and v > hi, "must be at most {maximum}"),
)


def _within[N](
    name: str, raw: str, convert: Callable[[str], N | None], limits: _Limits, *, lo: Any, hi: Any
) -> N:
    """``raw`` converted when it keeps ``limits``, else ``SettingsError``."""
    try:
        value = convert(raw)
    except ValueError:  # not a number, or more digits than int() parses
        value = None
    for broken, problem in limits:
        if broken(value, lo, hi):
            raise _bad(name, problem.format(minimum=lo, maximum=hi), raw)
    return cast(N, value)


class Kind(StrEnum):
    """How a setting's text parses (``_PARSE``)."""

    TEXT = "text"  # stripped of surrounding spaces
    URL = "url"  # the same, without a trailing "/"
    CHOICE = "choice"  # one of ``choices``, any case
    LIST = "list"  # comma-separated items, empty ones dropped
    NUMBER = "number"  # finite: positive, or at least ``minimum``
    INTEGER = "integer"  # whole: at least ``minimum``, at most ``maximum``


@dataclass(frozen=True)
class Setting[T]:
    """One environment variable: its name, default, why (``reason``), and how it parses;
    ``required``: no default. ``off``: a word meaning None, no limit."""

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
            return cast(T, require(env, self.name)[0])
        raw = env.get(self.name, "").strip()
        return cast(T, _PARSE[self.kind](self, raw)) if raw else self.default

    def field(self) -> T:
        """A dataclass field declared by this setting (its default is the setting's)."""
        metadata = {_DECLARATION: self}
        if self.required:
            return cast(T, dataclasses.field(metadata=metadata))
        return dataclasses.field(default=self.default, metadata=metadata)


def _one_of(setting: Setting[Any], raw: str) -> str:
    if raw.lower() not in setting.choices:
        raise _bad(setting.name, f"must be one of {', '.join(setting.choices)}", raw)
    return raw.lower()


def _plain_int(raw: str) -> int | None:
    return int(raw) if _INTEGER.fullmatch(raw) else None


def _whole(setting: Setting[Any], raw: str) -> int | None:
    """An integer setting's value: None for its ``off`` word, else a whole number."""
    if raw.lower() == setting.off:
        return None
    return _within(setting.name, raw, _plain_int, _WHOLE, lo=setting.minimum, hi=setting.maximum)


# How each kind parses a value that is set (an unset one is the default).
_PARSE: Final[Mapping[Kind, Callable[[Setting[Any], str], object]]] = {
    Kind.TEXT: lambda setting, raw: raw,
    Kind.URL: lambda setting, raw: raw.rstrip("/"),
    Kind.CHOICE: _one_of,
    Kind.LIST: lambda setting, raw: (
        tuple(filter(None, map(str.strip, raw.split(",")))) or tuple(setting.default)
    ),
    Kind.NUMBER: lambda s, raw: _within(s.name, raw, float, _REAL, lo=s.minimum, hi=None),
    Kind.INTEGER: _whole,
}


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
