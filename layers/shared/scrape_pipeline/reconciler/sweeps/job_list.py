"""The job-list sweep: settled jobs the ledger has not finished, read in resumable passes from the
watermark less the overlap; a count check finds those listed late. Unsettled ones are WATCHING."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass

from scrape_pipeline.config.settings import FromEnv, integer, number
from scrape_pipeline.geonode.client import JOBS_PAGE_MAX
from scrape_pipeline.geonode.listing_lag import JOBS_CHECKPOINT, LAG_MARGIN
from scrape_pipeline.geonode.models import JobSummary
from scrape_pipeline.jobs import JobKey, JobKind, Source
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.decide import decide
from scrape_pipeline.ledger.evidence import Evidence, Policy, Seen
from scrape_pipeline.reconciler.sweeps import (
    DEFAULT_MAX_PAGES,
    Budget,
    Sweep,
    SweepResult,
    created,
    ends,
)
from scrape_pipeline.reconciler.sweeps.job_list_state import Checkpoint, Counted, CountStep, Pass

# How far below the watermark the count check reaches (at least twice the overlap).
LATE_CHECK_SECONDS = 1800.0


@dataclass(frozen=True)
class JobListSettings(FromEnv):
    """The job-list sweep's knobs."""

    threshold_seconds: float = number(
        "RECONCILE_THRESHOLD_SECONDS",
        60.0,
        "a job created longer ago than this and settled is recovered unless the ledger has it: "
        "far longer than a healthy webhook takes (p99 under a second), far shorter than the "
        "sender's 5-minute retry. Recovering just before a late webhook costs nothing but a "
        "`WebhookLate` count",
    ).field()
    overlap_seconds: float = number(
        "RECONCILE_OVERLAP_SECONDS",
        30.0,
        "the job list is re-read this far below its watermark (the newest `created_at` it "
        "listed, on the API's clock) once after the watermark moves. A job listed late is found "
        "however late if the API lists jobs in creation order; the overlap must cover the spread "
        "(a job listed later than one created after it). The reconciler measures the lag it sees "
        "and re-reads twice that if it is more",
    ).field()
    lookback_seconds: float = number(
        "RECONCILE_LOOKBACK_SECONDS",
        86_400.0,
        "how far back the very first run looks. The job list is read newest first and every run "
        "reads its fresh ground before resuming older pending passes, so a day of backlog never "
        "delays newer jobs (`scrape_pipeline.reconciler.sweeps.job_list`)",
    ).field()
    count_check_seconds: float = number(
        "RECONCILE_COUNT_CHECK_SECONDS",
        900.0,
        "the job list's count check (a one-job list page, two when it counts its range anew) "
        "runs before a fresh pass once this long after the last; each fresh pass in between "
        "extends the range it counts. A job listed late below the overlap whose webhook was lost "
        "is found within this and one more job-list run. 0: before every fresh pass",
        minimum=0,
    ).field()
    max_pages: int = integer(
        "RECONCILE_MAX_PAGES",
        DEFAULT_MAX_PAGES,
        "most pages per run and sweep (per subscription for the delivery log, per state for "
        "stuck rows): a safety cap only, for runs without a deadline (the CLI, the local stack); "
        "the time budgets bound the work, and the next run resumes where this one stopped",
    ).field()


class JobListSweep(Sweep[JobListSettings]):
    """Reads the job list in passes and ensures the settled jobs."""

    name = Source.JOB_LIST

    def work(self, budget: Budget, result: SweepResult) -> None:
        """Fresh ground, then pending passes; the checkpoint saved whatever happens."""
        now = self._clock.time()
        saved = self._books.read(JOBS_CHECKPOINT)
        mark = Checkpoint.read(saved, now - self.settings.lookback_seconds, now)
        cut_short = True  # a failure cuts the run short too
        try:
            cut_short = self._passes(mark, budget.capped(self.settings.max_pages), result)
        finally:
            # A fresh pass not one page of which was read left the watermark where it was:
            # the next fresh pass covers its range again, so a pending copy would be read twice.
            mark.pending = [p for p in mark.pending if not (p.fresh and p.page == 1)]
            mark.bound()
            result.watermark = mark.watermark
            result.listing_lag = mark.lag
            result.complete = not cut_short and not mark.pending
            self._books.write(JOBS_CHECKPOINT, mark.fields())

    def _passes(self, mark: Checkpoint, budget: Budget, result: SweepResult) -> bool:
        """Fresh ground, the pending passes oldest first, then one closing fresh pass over the
        ground that came due meanwhile; True when cut short."""
        if self._fresh_pass(mark, budget, result):
            return True
        closing_left = True
        while mark.pending:
            if self._pending_pass(mark, budget, result):
                return True
            # A finished resumed pass took time: new ground may have come due.
            if closing_left and self._fresh_pass(mark, budget, result):
                return True
            closing_left = False
        return False

    def _new_ground(self, mark: Checkpoint) -> float | None:
        """The end of a fresh pass, if time passed since the last one (Lambda's clock)."""
        end = self._clock.time() - self.settings.threshold_seconds
        return end if end > max(mark.watermark, mark.fresh_end) else None

    def _pending_pass(self, mark: Checkpoint, budget: Budget, result: SweepResult) -> bool:
        """Resume the oldest pending pass; True when cut short (it stays pending)."""
        if budget.spent(result.list_pages):
            return True
        result.resumed_passes += 1
        current = mark.pending[0]
        self._read(current, mark, budget, result)
        mark.drop_finished()
        return not current.done

    def _fresh_pass(self, mark: Checkpoint, budget: Budget, result: SweepResult) -> bool:
        """Read the new ground, if any, in a fresh pass; True when the run is cut short."""
        fresh_end = self._new_ground(mark)
        if fresh_end is None:
            return False
        if budget.spent(result.list_pages):
            return True
        current, confirming, counting = self._fresh(mark, fresh_end, result)
        # Older passes wait: fresh ground gets half of what is left, so a backlog drains
        # even while every run's new ground could fill it.
        share = budget.share([1.0, 1.0]) if len(mark.pending) > 1 else budget
        try:
            self._read(current, mark, share, result, confirming=confirming)
        finally:
            next_start = mark.watermark - mark.overlap(self.settings.overlap_seconds)
            floor = int(mark.watermark - self._late_window(mark))
            mark.counted = counting.after(current, next_start, floor, mark.watermark)
        mark.drop_finished()
        # Cut short by its half, not by the run's budget: on to the oldest pass.
        return not current.done and budget.spent(result.list_pages)

    def _fresh(
        self, mark: Checkpoint, end: float, result: SweepResult
    ) -> tuple[Pass, bool, Counted]:
        """A fresh pass up to ``end`` (pending until done), whether it confirms the overlap,
        and the count check's range after the check."""
        s = self.settings
        overlap = mark.overlap(s.overlap_seconds)
        counting = self._count_check(mark, mark.watermark - overlap)
        current = Pass(mark.watermark - overlap, end, fresh=True)
        # Read again once the spread of the lag has passed since the watermark moved, the
        # overlap is done with, unless this pass moves it again.
        since_moved = end + s.threshold_seconds - mark.moved_at
        mark.pending.append(current)  # the newest pass until it completes
        result.list_passes += 1
        return current, bool(overlap) and since_moved >= overlap, counting

    def _count_check(self, mark: Checkpoint, start: float) -> Counted:
        """The count check before a fresh pass from ``start`` (``Checkpoint.count_step``): a
        range with more jobs than counted is read again first; returns the range to extend."""
        window = self._late_window(mark)
        split = int(start // 1)  # whole seconds: the API's date filters have no fraction
        now = self._clock.time()
        every = self.settings.count_check_seconds
        step = mark.count_step(now, split, every, mark.watermark - LAG_MARGIN * window)
        counted = mark.counted
        if counted is None:  # CountStep.BEGIN
            mark.counted_at = now
            return Counted.begin(split)
        if step is CountStep.EXTEND:
            return counted
        recount = self._count(counted.low, counted.top)
        if recount > counted.count:
            mark.pending.insert(0, counted.reread())
        mark.counted_at = now
        if step is CountStep.RECOUNT:
            return counted.recounted(recount, mark.watermark)
        floor = int(mark.watermark - window)
        base = Counted(floor, split, self._count(floor, split))
        return base.recounted(base.count, mark.watermark)

    def _late_window(self, mark: Checkpoint) -> float:
        """How far below the watermark the count check reaches."""
        return max(LATE_CHECK_SECONDS, LAG_MARGIN * mark.overlap(self.settings.overlap_seconds))

    def _count(self, start: int, end: int) -> int:
        """The jobs listed created in [start, end]: a one-job page's page count."""
        if start > end:
            return 0
        page = self._client.list_jobs(start_date=start, end_date=end, page=1, page_size=1)
        return page.page_count if page.items else 0

    def _read(
        self,
        current: Pass,
        mark: Checkpoint,
        budget: Budget,
        result: SweepResult,
        *,
        confirming: bool = False,
    ) -> None:
        """Read ``current`` from its page while the budget lasts, the checkpoint saved after
        each page; a page counts as read only once its jobs are handled."""
        # A fresh pass measures from the watermark it began at, a re-read from its parts'.
        began_at = mark.watermark
        lag_base = (lambda _: began_at) if current.fresh else current.lag_base
        while not budget.spent(result.list_pages):
            listing = self._client.list_jobs(
                start_date=current.start,
                end_date=current.end,
                page=current.page,
                page_size=JOBS_PAGE_MAX,
            )
            result.list_pages += 1
            result.jobs_seen += len(listing.items)
            created_at = self._handle(listing.items, current, lag_base, mark, result)
            # Only once its jobs are handled: a page that failed moves nothing.
            if current.fresh and current.page == 1:
                now = self._clock.time()
                mark.first_page(current.end, created_at.values(), now, confirming=confirming)
            if ends(listing):
                current.done = True
                return
            current.page += 1
            self._books.write(JOBS_CHECKPOINT, mark.fields())

    def _handle(
        self,
        items: Sequence[JobSummary],
        current: Pass,
        lag_base: Callable[[float], float | None],
        mark: Checkpoint,
        result: SweepResult,
    ) -> dict[JobKey, float]:
        """One page's jobs, one BatchGetItem: settled ones ensured, running ones parked
        WATCHING or reopened; returns when each was created."""
        settled, running, created_at = _sorted(items, current)
        rows = self._ledger.get_many([*settled, *running])
        now = self._clock.time()
        mark.measured(_listing_lag(lag_base, created_at, rows), now)
        reopen: list[JobKey] = []
        unknown: dict[JobKey, float] = {}
        for key, born in running.items():
            # The list proves a job closed as "unknown" exists; one it does not know is parked.
            move = decide(rows.get(key), _RUNNING, now, _POLICY).move
            if move is lifecycle.REOPEN:
                reopen.append(key)
            elif move is lifecycle.RECORD:
                unknown[key] = born
        result.recovered += self._recoverer.ensure_many(
            [*settled, *reopen], rows, source=Source.JOB_LIST
        )
        result.newly_watched += self._recoverer.watch_many(unknown, source=Source.WATCH)
        return created_at


# What the job list shows of a job it lists unsettled (it decides nothing by age).
_RUNNING = Evidence(Seen.LISTED_RUNNING, Source.JOB_LIST)
_POLICY = Policy()


def _sorted(
    items: Sequence[JobSummary], current: Pass
) -> tuple[list[JobKey], dict[JobKey, float], dict[JobKey, float]]:
    """A page's settled jobs, its running ones and every job's creation time."""
    settled: list[JobKey] = []
    running: dict[JobKey, float] = {}
    created_at: dict[JobKey, float] = {}
    for item in items:
        key = JobKey(JobKind.EXTRACT, item.job_id)
        # A job listed without its creation time counts as created at the range's start, so
        # inside the range read.
        created_at[key] = current.seen[item.job_id] = created(item, current.start)
        if item.is_terminal:
            settled.append(key)
        else:
            running[key] = created_at[key]
    return settled, running, created_at


def _listing_lag(
    lag_base: Callable[[float], float | None],
    created_at: Mapping[JobKey, float],
    known: Container[JobKey],
) -> float:
    """How far below its ``lag_base`` the unknown job furthest below was created (0: none)."""
    samples = [
        base - c
        for key, c in created_at.items()
        if key not in known and (base := lag_base(c)) is not None
    ]
    return max(samples, default=0.0)
