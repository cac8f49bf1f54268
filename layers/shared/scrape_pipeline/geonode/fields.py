"""Lenient readers of the API's JSON values (times, objects and counts that may be missing), and
``Answer``, the typed answer whose ``api`` fields are read from the keys of their names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Final, Self

REQUIRED: Final = object()  # an ``api`` field's default: its key missing is a KeyError


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` or offset) as an aware datetime; None when absent or invalid."""
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime | float) -> str:
    """A UTC ISO 8601 timestamp with a ``Z`` suffix, as the API writes them."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def as_dict(value: Any) -> dict[str, Any]:
    """A copy of a JSON object; an empty one for anything else."""
    return dict(value) if isinstance(value, Mapping) else {}


def objects(rows: Any) -> list[Mapping[str, Any]]:
    """The JSON objects of the list ``rows``; anything else (in it, or instead of it) is skipped."""
    return [row for row in rows if isinstance(row, Mapping)] if isinstance(rows, list) else []


def of_type[T](value: object, kind: type[T]) -> T | None:
    """``value`` when it is a ``kind``; None for anything else (a wrong type reads as absent)."""
    return value if isinstance(value, kind) else None


def int_or_none(value: Any) -> int | None:
    """An integer (a bool is not a count); None for anything else."""
    return value if type(value) is int else None


def as_int(value: Any, default: int = 0) -> int:
    """An integer (a bool is not a count); ``default`` for anything else."""
    return value if type(value) is int else default


def api(read: Callable[[Any], Any] = lambda value: value, *, default: Any = None) -> Any:
    """A field read from its key in the answer (``default`` when absent) by ``read``."""
    return field(metadata={"read": read, "default": default})


@dataclass(frozen=True)
class Answer:
    """An answer of the API: its ``api`` fields read from it, the whole answer kept in ``raw``
    (so no field the contract does not name yet is lost)."""

    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Self:
        """Read each ``api`` field; ``KeyError`` when a ``REQUIRED`` one is missing."""
        read = {f.name: _read(body, f.name, **f.metadata) for f in fields(cls) if f.metadata}
        return cls(raw=dict(body), **read)


def _read(body: Mapping[str, Any], name: str, read: Callable[[Any], Any], default: Any) -> Any:
    return read(body[name] if default is REQUIRED else body.get(name, default))
