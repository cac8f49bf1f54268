"""Watching long-running jobs: parked WATCHING rows, woken once they settle, at a shared cost.

A job unsettled for WATCH_AFTER seconds is parked WATCHING (by the processor, or by the
job-list sweep for a job it saw unsettled): no message, no poll of its own. Its webhook wakes
it (the receiver); if the webhook is lost, this sweep does:

    extract jobs      the API lists the account's unsettled jobs (status queued, then
                      processing); a watched job missing from that list has settled and is
                      woken. A run costs one list page per 100 unsettled jobs, however many
                      jobs are watched.
    batches, crawls   the API lists neither: each is woken (the processor polls it once, and
                      parks it again if it still runs) on a schedule that follows its age:
                      first once it is WATCH_FIRST_POLL old, then whenever it has been parked
                      for half its age, at most WATCH_POLL apart. A batch submitted through
                      ``scrape_pipeline.submissions`` is recorded WATCHING at once, so one whose
                      webhook is lost is found about WATCH_FIRST_POLL after it settles if it
                      settles fast, and within its own age otherwise: polls at 90 s, 3, 6, 12
                      minutes... then hourly, a dozen GETs for a day-long crawl.

Watched rows are read page by page from the pending index, oldest ``state_since`` first. A run
cut short by its budget saves the ``state_since`` it reached and the next run goes on from
there (a row re-parked meanwhile has a newer one and is met again later: never skipped).

A job woken by mistake (the list read while it moved) costs one GET: the processor finds it
unsettled and parks it again. The opposite mistake cannot happen: a listed job is unsettled.

    sick jobs         a job the processor parked because its own calls kept failing (5xx,
                      timeouts, 404s of a job proven to exist) is polled on the batches'
                      schedule, counted from the start of its failing run, whatever the list
                      says (settled, it would be woken every run; missing, never). Parked
                      about eight minutes into the run, it is polled at about 12, 18, 27,
                      40... minutes, then hourly, until its GET answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.budget import DEFAULT_MAX_PAGES, Budget
from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.jobs import SOURCE_WATCH, JobKind, JobState
from scrape_pipeline.ledger import Bookkeeping, Ledger, LedgerRow
from scrape_pipeline.recovery import Recoverer

WATCH_CHECKPOINT = "reconciler-watch"
UNSETTLED_STATUSES = ("queued", "processing")
ROWS_PER_PAGE = 100


@dataclass(frozen=True)
class WatchSettings:
    """How watched rows are read and batches and crawls polled."""

    poll_seconds: float = 3600.0  # a running batch or crawl is polled at least this often
    first_poll_seconds: float = 90.0  # and first polled at this age (the threshold's twin)
    max_pages: int = DEFAULT_MAX_PAGES  # ledger pages and API pages per run, each


@dataclass
class WatchResult:
    """What one sweep did."""

    watched: int = 0  # rows read this run
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
        self._books = Bookkeeping(ledger)
        self._client = client
        self._recoverer = recoverer
        self._clock = clock

    def sweep(self, budget: Budget) -> WatchResult:
        """Wake every watched job that has settled, and the batches and crawls due a poll."""
        result = WatchResult()
        now = self._clock.time()
        saved = self._books.read(WATCH_CHECKPOINT)
        after = float(saved["after"]) if saved and saved.get("after") else None
        unsettled: set[str] | None = None
        cursor = None
        for _ in range(self.settings.max_pages):
            if budget.spent():
                return self._cut_short(result, after)
            rows, cursor = self._ledger.pending(
                JobState.WATCHING,
                since_before=now + 1,
                since_after=after if cursor is None else None,
                limit=ROWS_PER_PAGE,
                cursor=cursor,
            )
            result.row_pages += 1
            result.watched += len(rows)
            if unsettled is None and any(r.key.kind is JobKind.EXTRACT for r in rows):
                unsettled = self._unsettled(budget, result)
                if unsettled is None:
                    return self._cut_short(result, after)
            due = {row.key: row for row in rows if self._due(row, now, unsettled or set())}
            result.woken += self._recoverer.ensure_many(list(due), due, source=SOURCE_WATCH)
            if cursor is None or not rows:
                if after is not None:
                    self._books.write(WATCH_CHECKPOINT, {"after": ""})
                return result
            # Within a run the query's own cursor goes on; across runs the next one starts at
            # this state_since, inclusive: a row sharing it is read again, never skipped.
            after = rows[-1].state_since
        return self._cut_short(result, after)

    def _due(self, row: LedgerRow, now: float, unsettled: set[str]) -> bool:
        if row.failing_since is not None:
            return self._poll_due(row, now, age=now - row.failing_since)
        if row.key.kind is JobKind.EXTRACT:
            return row.key.job_id not in unsettled
        return self._poll_due(row, now, age=now - (row.job_created_at or row.created_at))

    def _poll_due(self, row: LedgerRow, now: float, *, age: float) -> bool:
        # Parked for half its age: polls at ages 1, 2, 4, 8... x first_poll, then capped.
        interval = min(self.settings.poll_seconds, max(self.settings.first_poll_seconds, age / 2))
        return now - row.state_since >= interval

    def _cut_short(self, result: WatchResult, after: float | None) -> WatchResult:
        result.complete = False
        self._books.write(WATCH_CHECKPOINT, {"after": "" if after is None else f"{after:.3f}"})
        return result

    def _unsettled(self, budget: Budget, result: WatchResult) -> set[str] | None:
        """Ids of the account's unsettled jobs; None when cut short (then nothing is woken
        from a partial list)."""
        ids: set[str] = set()
        for status in UNSETTLED_STATUSES:
            page = 1
            while True:
                if budget.spent() or result.list_pages >= self.settings.max_pages:
                    return None
                listing = self._client.list_jobs(status=status, page=page)
                result.list_pages += 1
                ids.update(job.job_id for job in listing.items)
                if listing.is_last or not listing.items:
                    break
                page += 1
        return ids
