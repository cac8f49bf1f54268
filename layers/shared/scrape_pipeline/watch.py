"""Watching long-running jobs: parked WATCHING rows, woken once they settle, at a shared cost.

A job unsettled for WATCH_AFTER seconds is parked WATCHING (by the processor, or by the
job-list sweep for a job it saw unsettled): no message, no poll of its own. Its webhook wakes
it (the receiver); if the webhook is lost, this sweep does:

    extract jobs      the API lists the account's unsettled jobs (status queued, then
                      processing) from the oldest watched job's creation on; a watched job
                      missing from that list has settled and is woken. A run costs one list
                      page per 100 unsettled jobs, however many are watched.
    batches, crawls   the API lists neither: each is woken (the processor polls it once, and
                      parks it again if it still runs) every WATCH_POLL seconds.

A job woken by mistake (the list read while it moved) costs one GET: the processor finds it
unsettled and parks it again. The opposite mistake cannot happen: a listed job is unsettled.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.budget import DEFAULT_MAX_PAGES, Budget
from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.ledger import JobKind, JobState, Ledger, LedgerRow
from scrape_pipeline.recovery import Recoverer

SOURCE_WATCH = "watch"
UNSETTLED_STATUSES = ("queued", "processing")
ROWS_PER_PAGE = 100


@dataclass(frozen=True)
class WatchSettings:
    """How watched rows are read and batches and crawls polled."""

    poll_seconds: float = 3600.0  # a running batch or crawl is polled this often
    overlap_seconds: float = 120.0  # list from a little before the oldest watched job
    max_pages: int = DEFAULT_MAX_PAGES  # ledger pages and API pages per run, each


@dataclass
class WatchResult:
    """What one sweep did."""

    watched: int = 0
    woken: int = 0
    row_pages: int = 0
    list_pages: int = 0
    complete: bool = True


class Watcher:
    """The reconciler's watch sweep."""

    def __init__(
        self,
        settings: WatchSettings,
        *,
        ledger: Ledger,
        client: GeonodeClient,
        recoverer: Recoverer,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._client = client
        self._recoverer = recoverer
        self._clock = clock

    def sweep(self, budget: Budget) -> WatchResult:
        """Wake every watched job that has settled, and the batches and crawls due a poll."""
        result = WatchResult()
        now = self._clock.time()
        rows = self._watched(now, budget, result)
        extract = [r for r in rows if r.key.kind is JobKind.EXTRACT]
        due: list[LedgerRow] = [
            r
            for r in rows
            if r.key.kind is not JobKind.EXTRACT
            and now - r.state_since >= self.settings.poll_seconds
        ]
        if extract and not budget.spent():
            unsettled = self._unsettled_since(min(map(job_created, extract)), budget, result)
            if unsettled is not None:
                due.extend(r for r in extract if r.key.job_id not in unsettled)
        by_key = {row.key: row for row in due}
        result.woken += self._recoverer.ensure_many(list(by_key), by_key, source=SOURCE_WATCH)
        return result

    def _watched(self, now: float, budget: Budget, result: WatchResult) -> list[LedgerRow]:
        rows: list[LedgerRow] = []
        cursor = None
        for _ in range(self.settings.max_pages):
            page, cursor = self._ledger.pending(
                JobState.WATCHING, since_before=now + 1, limit=ROWS_PER_PAGE, cursor=cursor
            )
            result.row_pages += 1
            rows.extend(page)
            if cursor is None:
                break
            if budget.spent():
                result.complete = False
                break
        else:
            result.complete = cursor is None
        result.watched = len(rows)
        return rows

    def _unsettled_since(
        self, since: float, budget: Budget, result: WatchResult
    ) -> set[str] | None:
        """Ids of the account's unsettled jobs created since ``since``; None when cut short
        (then nothing is woken from a partial list)."""
        ids: set[str] = set()
        start = since - self.settings.overlap_seconds
        for status in UNSETTLED_STATUSES:
            page = 1
            while True:
                if budget.spent() or result.list_pages >= self.settings.max_pages:
                    result.complete = False
                    return None
                listing = self._client.list_jobs(status=status, start_date=start, page=page)
                result.list_pages += 1
                ids.update(job.job_id for job in listing.items)
                if listing.is_last or not listing.items:
                    break
                page += 1
        return ids


def job_created(row: LedgerRow) -> float:
    """When the job itself was created, as the row recorded it (else the row's creation)."""
    if row.job_created_at is None:
        return row.created_at
    return min(row.job_created_at, row.created_at)
