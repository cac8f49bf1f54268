"""ISO 8601 rendering and parsing of clock seconds (UTC, ``Z`` suffix)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(ts: float) -> str:
    """Epoch seconds as ``2026-05-27T08:16:09.123Z`` (ms keep same-second jobs ordered)."""
    moment = datetime.fromtimestamp(ts, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_seconds(ts: float) -> str:
    """Epoch seconds as ``2026-05-27T08:16:09Z`` (the webhook envelope's form)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_or_none(ts: float | None) -> str | None:
    """``iso(ts)``, or None for a missing time."""
    return None if ts is None else iso(ts)


def parse_iso(text: str) -> float:
    """An ISO 8601 date or date-time as epoch seconds; naive values are taken as UTC."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
