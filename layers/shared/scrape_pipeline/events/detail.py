"""What an outcome's event says, and its id: derived from the outcome (never random), so every
repeat of it carries the same one, and a reopened job's new outcome a new one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from scrape_pipeline.jobs import JobKey, Outcome

SOURCE: Final = "scrape-pipeline"


class DetailType(StrEnum):
    """An event's ``DetailType``: one per outcome that is told (a resubmission is not)."""

    STORED = "Job Stored"
    DEAD_LETTERED = "Job Dead-Lettered"
    CANCELLED = "Job Cancelled"
    RUN_COMPLETED = "Run Completed"  # a submission run's (``scrape_pipeline.runs.completion``)


DETAIL_TYPES: Final[Mapping[Outcome, DetailType]] = {
    Outcome.STORED: DetailType.STORED,
    Outcome.DEAD_LETTERED: DetailType.DEAD_LETTERED,
    Outcome.CANCELLED: DetailType.CANCELLED,
}
# The row's detail fields an event repeats, under the same names.
_FROM_DETAIL: Final = ("prefix", "items_stored", "items_failed", "tokens_charged", "reason")
_COUNTS: Final = frozenset({"items_stored", "items_failed", "tokens_charged"})


def event_id(key: JobKey, outcome: Outcome, reopens: int) -> str:
    """The outcome's stable id: the same for every emit of it, new after a reopen."""
    text = f"{key.kind.value}#{key.job_id}#{outcome.value}#{reopens}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class OutcomeEvent:
    """One outcome's event: its ``DetailType`` and its detail (``event_id`` within)."""

    detail_type: DetailType
    detail: Mapping[str, Any]

    @property
    def event_id(self) -> str:
        """The outcome's stable id."""
        return str(self.detail["event_id"])

    def to_json(self) -> str:
        """The form the outbox keeps on the row."""
        return json.dumps(
            {"detail_type": self.detail_type.value, "detail": self.detail},
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> OutcomeEvent:
        """The event the outbox kept; ``ValueError`` if it is not one."""
        data = json.loads(text)
        return cls(DetailType(data["detail_type"]), dict(data["detail"]))


def outcome_event(
    key: JobKey,
    outcome: Outcome,
    *,
    reopens: int,
    finished_at: float,
    bucket: str,
    settled_at: float | None = None,
    detail: Mapping[str, str],
    url: str | None = None,
    keys: list[str] | None = None,
    run: str | None = None,
) -> OutcomeEvent | None:
    """The event of ``outcome`` (None: not told, a resubmission), from the row's ``detail``; a
    batch's items are in its manifest, which it names."""
    detail_type = DETAIL_TYPES.get(outcome)
    if detail_type is None:
        return None
    body: dict[str, Any] = {
        "event_id": event_id(key, outcome, reopens),
        "kind": key.kind.value,
        "job_id": key.job_id,
        "outcome": outcome.value,
        "bucket": bucket,
        "settled_at": round(finished_at if settled_at is None else settled_at, 3),
    }
    for name in _FROM_DETAIL:
        if name in detail:
            body[name] = int(detail[name]) if name in _COUNTS else detail[name]
    body.update({name: v for name, v in (("url", url), ("run", run)) if v is not None})
    body.update(_where_stored(outcome, detail, finished_at, keys))
    return OutcomeEvent(detail_type, body)


def _where_stored(
    outcome: Outcome, detail: Mapping[str, str], finished_at: float, keys: list[str] | None
) -> dict[str, Any]:
    """Where a stored job's objects, or a dead-lettered job's record, are."""
    if outcome is Outcome.DEAD_LETTERED and "record" in detail:
        return {"record_key": detail["record"]}
    if outcome is not Outcome.STORED:
        return {}
    where: dict[str, Any] = {"stored_at": round(finished_at, 3)}
    if keys is not None:
        where["keys"] = sorted(keys)
    elif "prefix" in detail:
        where["manifest_key"] = f"{detail['prefix']}/manifest.json"
    return where
