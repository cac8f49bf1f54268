"""How a run's jobs ended, for ``runs show`` to join with the journal's entries.

    with a stack    the ledger's rows of the run's job ids (``BatchGetItem``, 100 keys a call):
                    settled = DONE; stored / dead-lettered = its outcome; tokens charged
                    as the processor kept them in a stored extract's ``detail``
    local           what ``poll`` saw, kept in the journal file's ``job_outcomes`` table:
                    settled = the API's terminal status; stored = poll wrote its result
                    (``--out``, a job that did not fail);
                    dead-lettered = failed, cancelled, or unknown to the API; tokens charged

The journal says which jobs a run made; this says what became of them. Neither writes the
other's rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from scrape_pipeline.geonode.models import ApiStatus
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger import Ledger, LedgerRow

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

    from scrape_pipeline.geonode.models import Job

_KEYS_PER_READ: Final = 100  # BatchGetItem's limit
_FAILED: Final = frozenset({str(ApiStatus.FAILED), str(ApiStatus.CANCELLED), "unknown"})
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS job_outcomes (
    job_id TEXT PRIMARY KEY, status TEXT NOT NULL, written TEXT, tokens_charged INTEGER,
    settled_at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class JobOutcome:
    """Where one job ended (or not yet: ``settled`` False)."""

    job_id: str
    settled: bool
    stored: bool = False
    dead_lettered: bool = False
    tokens_charged: int | None = None


class Outcomes(Protocol):
    """Where a run's job outcomes are read from."""

    def outcomes(self, kind: JobKind, job_ids: Sequence[str]) -> dict[str, JobOutcome]:
        """The known outcome of each of ``job_ids`` (a job not known is absent)."""
        ...


class LedgerOutcomes:
    """The ledger's rows, as the pipeline's processor left them."""

    def __init__(self, table_name: str, *, client: DynamoDBClient) -> None:
        self._ledger = Ledger(table_name, client=client)

    def outcomes(self, kind: JobKind, job_ids: Sequence[str]) -> dict[str, JobOutcome]:
        found: dict[str, JobOutcome] = {}
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), _KEYS_PER_READ):
            keys = [JobKey(kind, job_id) for job_id in unique[start : start + _KEYS_PER_READ]]
            for key, row in self._ledger.get_many(keys).items():
                found[key.job_id] = _from_row(row)
        return found


def _from_row(row: LedgerRow) -> JobOutcome:
    done = row.state is JobState.DONE
    return JobOutcome(
        row.key.job_id,
        settled=done,
        stored=done and row.outcome is Outcome.STORED,
        dead_lettered=done and row.outcome is Outcome.DEAD_LETTERED,
        tokens_charged=_count(row.detail.get(DETAIL_TOKENS)),
    )


def _count(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None  # a detail written by hand, or by another version: not a charge


class FileOutcomes:
    """The ``job_outcomes`` table of a journal file: what ``poll`` saw settle."""

    def __init__(self, path: str | Path) -> None:
        self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def record(self, job: Job, written: str | None, now: float) -> None:
        """Keep a settled job's status, where poll wrote it, and its charge (once per job:
        a later poll that wrote it too keeps the first place)."""
        self._db.execute(
            "INSERT INTO job_outcomes VALUES (?, ?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE "
            "SET written = COALESCE(job_outcomes.written, excluded.written)",
            (job.job_id, str(job.status), written, job.tokens_charged, now),
        )

    def record_unknown(self, job_id: str, now: float) -> None:
        """Keep a job the API does not know (poll's ``unknown``)."""
        self._db.execute(
            "INSERT OR IGNORE INTO job_outcomes VALUES (?, 'unknown', NULL, NULL, ?)",
            (job_id, now),
        )

    def outcomes(self, kind: JobKind, job_ids: Sequence[str]) -> dict[str, JobOutcome]:
        del kind  # poll follows extract jobs only: job ids do not collide across kinds here
        found: dict[str, JobOutcome] = {}
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), 500):  # below SQLite's bound-parameter limit
            chunk = unique[start : start + 500]
            rows = self._db.execute(
                "SELECT job_id, status, written, tokens_charged FROM job_outcomes "  # noqa: S608
                f"WHERE job_id IN ({', '.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            for job_id, status, written, tokens in rows:
                found[job_id] = JobOutcome(
                    job_id,
                    settled=True,
                    stored=written is not None and status not in _FAILED,
                    dead_lettered=status in _FAILED,
                    tokens_charged=tokens,
                )
        return found


def totals(
    entries: Iterable[tuple[int, str | None]], found: Mapping[str, JobOutcome]
) -> dict[str, int | None]:
    """URLs settled, stored, dead-lettered, and tokens charged, of ``(urls, job_id)`` pairs."""
    counts: dict[str, int] = {"settled": 0, "stored": 0, "dead_lettered": 0}
    tokens: int | None = None
    for urls, job_id in entries:
        outcome = found.get(job_id) if job_id else None
        if outcome is None or not outcome.settled:
            continue
        counts["settled"] += urls
        counts["stored"] += urls if outcome.stored else 0
        counts["dead_lettered"] += urls if outcome.dead_lettered else 0
        if outcome.tokens_charged is not None:
            tokens = (tokens or 0) + outcome.tokens_charged
    return {**counts, "tokens_charged": tokens}


__all__: Sequence[str] = (
    "FileOutcomes",
    "JobOutcome",
    "LedgerOutcomes",
    "Outcomes",
    "totals",
)
