"""How a run's jobs ended, for ``runs show`` to join with the journal's entries.

    with a stack    the ledger's rows of the run's job ids (``BatchGetItem``, 100 keys a call),
                    each followed through its resubmissions (``scrape_pipeline.ledger.chains``) to
                    the job that ended its chain: settled = that chain ended (its last job
                    DONE, not resubmitted); stored / dead-lettered = that job's outcome (a
                    batch's URLs: its items stored and failed, which the processor
                    dead-letters); tokens charged as the processor kept them in the rows'
                    ``detail``, every job of the chain (a batch's or crawl's: its
                    ``token_summary``)
    local           what ``poll`` saw, kept in the journal file's ``job_outcomes`` table (and
                    a batch's or crawl's items in ``item_outcomes``):
                    settled = the API's terminal status; stored = poll wrote its result
                    (``--out``, a job that did not fail);
                    dead-lettered = failed, cancelled, or unknown to the API; tokens charged

A batch's URL ends as its item does (its ``url``): stored, or dead-lettered when the item
failed or was cancelled, as an extract job would; a URL the batch has no item for (the API
dropped it as invalid) is settled only. A crawl is one URL of its run: it ends as the crawl.

The journal says which jobs a run made; this says what became of them. Neither writes the
other's rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from scrape_pipeline.geonode.models import ApiStatus
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger import chains
from scrape_pipeline.ledger.chains import Chain
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.rows import LedgerRow

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

    from scrape_pipeline.geonode.models import Job
    from scrape_pipeline_ops.paged_poller import PagedJob

_KEYS_PER_READ: Final = 100  # BatchGetItem's limit
_CHUNK: Final = 500  # ids a SELECT binds: below SQLite's bound-parameter limit
_FAILED: Final = frozenset({str(ApiStatus.FAILED), str(ApiStatus.CANCELLED), "unknown"})
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS job_outcomes (
    job_id TEXT PRIMARY KEY, status TEXT NOT NULL, written TEXT, tokens_charged INTEGER,
    settled_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS item_outcomes (
    job_id TEXT NOT NULL, item INTEGER NOT NULL, url TEXT, status TEXT NOT NULL, written TEXT,
    tokens_charged INTEGER, PRIMARY KEY (job_id, item)
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
    # A batch's URLs by how its items ended, when known (the flags above are the job's own).
    stored_urls: int | None = None
    dead_lettered_urls: int | None = None
    by_url: Mapping[str, JobOutcome] = field(default_factory=dict)

    def of_url(self, url: str) -> JobOutcome:
        """How one URL of the job ended: its item's outcome in a batch, else the job's."""
        return self.by_url.get(url, self)

    def urls_stored(self, urls: int) -> int:
        """How many of the job's ``urls`` were stored."""
        if self.stored_urls is not None:
            return min(self.stored_urls, urls)
        return urls if self.stored else 0

    def urls_dead_lettered(self, urls: int) -> int:
        """How many of the job's ``urls`` were dead-lettered."""
        if self.dead_lettered_urls is not None:
            return min(self.dead_lettered_urls, urls)
        return urls if self.dead_lettered else 0


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
        # Each job followed through its resubmissions to the job that ended its chain, as the
        # run sweep does: a job resubmitted has not settled the URL, the job after it may.
        starts = {job_id: JobKey(kind, job_id) for job_id in dict.fromkeys(job_ids)}
        followed = chains.follow(self._ledger, starts)
        return {job_id: _from_chain(chain) for job_id, chain in followed.items() if chain.rows}


def _from_chain(chain: Chain) -> JobOutcome:
    """Where a chain's last job read ended (its id), settled once the chain has; the tokens
    every job of it was charged."""
    last = _from_row(chain.rows[-1])
    charged = [t for row in chain.rows if (t := _count(row.detail.get(DETAIL_TOKENS))) is not None]
    if not chain.ended:
        last = replace(last, settled=False, stored=False, dead_lettered=False)
    return replace(last, tokens_charged=sum(charged) if charged else None)


def _from_row(row: LedgerRow) -> JobOutcome:
    done = row.state is JobState.DONE
    # A batch the processor stored page by page: its items stored, and failed (dead-lettered).
    by_items = done and row.key.kind is JobKind.BATCH and "items_stored" in row.detail
    return JobOutcome(
        row.key.job_id,
        settled=done,
        stored=done and row.outcome is Outcome.STORED,
        dead_lettered=done and row.outcome is Outcome.DEAD_LETTERED,
        tokens_charged=_count(row.detail.get(DETAIL_TOKENS)),
        stored_urls=_count(row.detail.get("items_stored")) if by_items else None,
        dead_lettered_urls=_count(row.detail.get("items_failed")) if by_items else None,
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
        self._keep_job(job.job_id, str(job.status), written, job.tokens_charged, now)

    def record_paged(
        self, job: PagedJob, written: str | None, items: Sequence[str | None], now: float
    ) -> None:
        """Keep a settled batch or crawl, and each of its items with where poll wrote it
        (``items``, in the order of ``job.items``), in one transaction."""
        rows = [
            (job.job_id, index, item.url, str(item.status), where)
            for (index, item), where in zip(job.numbered(), items, strict=True)
        ]
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT INTO item_outcomes VALUES (?, ?, ?, ?, ?, NULL) "
                "ON CONFLICT (job_id, item) DO UPDATE "
                "SET written = COALESCE(item_outcomes.written, excluded.written)",
                rows,
            )
            self._keep_job(job.job_id, job.status, written, job.tokens_charged, now)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _keep_job(
        self, job_id: str, status: str, written: str | None, tokens: int | None, now: float
    ) -> None:
        self._db.execute(
            "INSERT INTO job_outcomes VALUES (?, ?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE "
            "SET written = COALESCE(job_outcomes.written, excluded.written)",
            (job_id, status, written, tokens, now),
        )

    def record_unknown(self, job_id: str, now: float) -> None:
        """Keep a job the API does not know (poll's ``unknown``)."""
        self._db.execute(
            "INSERT OR IGNORE INTO job_outcomes VALUES (?, 'unknown', NULL, NULL, ?)",
            (job_id, now),
        )

    def outcomes(self, kind: JobKind, job_ids: Sequence[str]) -> dict[str, JobOutcome]:
        # Ids are the API's (UUIDs), unique across kinds: a run's kind says which to read.
        found: dict[str, JobOutcome] = {}
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            rows = self._select(
                "SELECT job_id, status, written, tokens_charged FROM job_outcomes", chunk
            )
            items = self._items(chunk) if kind is JobKind.BATCH else {}
            for job_id, status, written, tokens in rows:
                by_url = items.get(job_id)
                if by_url is None:
                    found[job_id] = _settled(job_id, status, written, tokens)
                    continue
                # A batch: its URLs end as its items do; a URL without an item settled only.
                found[job_id] = JobOutcome(
                    job_id,
                    settled=True,
                    dead_lettered=status == "unknown",
                    tokens_charged=tokens,
                    stored_urls=sum(o.stored for o in by_url.values()),
                    dead_lettered_urls=sum(o.dead_lettered for o in by_url.values()),
                    by_url=by_url,
                )
        return found

    def _select(self, head: str, chunk: Sequence[str]) -> list[Any]:
        where = f" WHERE job_id IN ({', '.join('?' * len(chunk))})"
        return self._db.execute(head + where, chunk).fetchall()

    def _items(self, chunk: Sequence[str]) -> dict[str, dict[str, JobOutcome]]:
        """Each batch's items by URL, as outcomes of their own."""
        found: dict[str, dict[str, JobOutcome]] = {}
        rows = self._select("SELECT job_id, url, status, written FROM item_outcomes", chunk)
        for job_id, url, status, written in rows:
            found.setdefault(job_id, {})[url or ""] = _settled(job_id, status, written, None)
        return found


def _settled(job_id: str, status: str, written: str | None, tokens: int | None) -> JobOutcome:
    """A job (or item) poll saw settle: stored where it wrote one that did not fail."""
    return JobOutcome(
        job_id,
        settled=True,
        stored=written is not None and status not in _FAILED,
        dead_lettered=status in _FAILED,
        tokens_charged=tokens,
    )


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
        counts["stored"] += outcome.urls_stored(urls)
        counts["dead_lettered"] += outcome.urls_dead_lettered(urls)
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
