"""The reconciler's job-list sweep: settled jobs the ledger has not finished, at the list's pace.

The extract job list is read in passes, each a time range read newest first page by page. A
range lies wholly in the past (its end is ``now - threshold``, and jobs are listed by
creation), so its pages never move, and a page number is a valid point to resume it from.

The durable state (one bookkeeping row, written after every page, so a run killed mid-pass
keeps the pages it read) is the watermark, the measured listing lag, the pending passes and
the count check's last count:

    watermark   the newest ``created_at`` a fresh pass has listed, on the API's own clock:
                every job created before it is read by a finished pass, inside a pending
                pass, or listed late (below); the next fresh pass starts there less the overlap
    lag         the measured listing lag: how far below the watermark the jobs a fresh pass
                found for the first time were created (the API lists some jobs late). The
                overlap is the larger of RECONCILE_OVERLAP_SECONDS and twice it, for a day
    pending     passes cut short (time or page cap), oldest first, each with its next page
    counted     the count check's range, the jobs listed in it, the watermark each part's
                unlisted jobs were unlisted at, and when it was last counted

A job created after the newest listed one is read by the next fresh pass however late the API
lists it, and whatever the offset between the API's clock and Lambda's (only the range's end,
``now - threshold``, is on Lambda's clock): the overlap has to cover only the spread of the
lag, a job listed later than one created after it.

The overlap only covers a lag it has measured, and it measures only what it re-reads: a lag
that grows (or jumps) past twice the overlap leaves jobs below it that no pass reads again (11
of 60 lost in a test where the lag rose from nothing to five minutes in a quarter of an hour).
The count check sees them. It keeps a range, [low, top], and how many jobs the API listed in
it; each fresh pass extends it up to where the next fresh pass starts (``Counted.after``), the
jobs the pass saw above the old top counted in: a job listed too late for the page that should
have shown it is not. A first pass's range is what it saw (no page asked). Once every
RECONCILE_COUNT_CHECK_SECONDS (Lambda's clock), before a fresh pass, the check counts the range
again (one page of one job: its page count is the count). More jobs there now were listed late,
below any fresh pass: the range is read again, first of the pending passes, and each job it
finds that the ledger does not know is a lag sample, measured from the watermark of the part of
the range it is in (the watermark at which it was still unlisted: the pass that extended the
range over it, or the last check), so the overlap widens to cover the lag. So a late-listed job
whose webhook was lost is found within RECONCILE_COUNT_CHECK_SECONDS and one more job-list run.
The range is counted anew from LATE_CHECK_SECONDS (or twice the overlap) below the watermark
(a second page) when it reaches deeper than twice that, and when the pass would start above
its top (a pass cut short leaves its range to its pending copy, and the range ends where it
was; the next pass starts higher): no gap, the check runs then even inside its interval. A lag
that stays within the overlap costs nothing but the check's page: a job listed late above where
the next pass starts is read by it. (A job listed late on a page of a pass cut short, below the
next start, read by neither, is missed: not closed.)

A run works until its time budget (or the optional page cap) is spent, in this order:

    1. fresh pass     [watermark - overlap, now - threshold], when there is new ground
                      (now - threshold beyond the watermark); its first page moves the
                      watermark to the newest job listed. Newest first, so the jobs that
                      just settled are the first recovered even on the very first run, whose
                      range reaches back RECONCILE_LOOKBACK (24 h): its rest becomes a pending
                      pass, and every later run reads its own fresh ground before resuming it.
    2. pending passes oldest first, each resumed at its saved page. While any wait, the
                      fresh pass gets at most half of the run's time, so an old backlog is never
                      starved by fresh work: it gets at least the other half.
    3. closing pass   once a run has finished a pending pass, one more fresh pass over the
                      ground that came due while it worked (nothing, on a stopped clock).

Unsettled jobs pin nothing: a pass that lists a job not yet settled records it WATCHING
(unless the ledger knows it already), and the watch sweep, which runs every run, wakes it once
the API no longer lists it unsettled. So the watermark only ever moves forward and no run
re-reads listings it has read (the overlap aside): pinning it at a slow job instead would
re-read everything since that job every minute. A known row closed as "unknown job" or "never
settled" is reopened: the list proves the job exists.

Cost when the account is healthy (every job already DONE): one list page and one BatchGetItem
per 100 jobs examined, plus the checkpoint's one read a run and one write a page (saved as it
goes), and the count check's one-job page every RECONCILE_COUNT_CHECK_SECONDS (two when the
range is counted anew).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrape_pipeline import lifecycle
from scrape_pipeline.budget import DEFAULT_MAX_PAGES, Budget
from scrape_pipeline.decisions import Evidence, Policy, Seen, decide
from scrape_pipeline.geonode.client import JOBS_PAGE_MAX
from scrape_pipeline.geonode.models import JobSummary
from scrape_pipeline.jobs import SOURCE_JOB_LIST, JobKey, JobKind, Source
from scrape_pipeline.settings import FromEnv, integer, number
from scrape_pipeline.sweeps import Sweep, SweepResult, passes
from scrape_pipeline.sweeps.job_list_state import (
    JOBS_CHECKPOINT,
    LAG_MARGIN,
    Checkpoint,
    Counted,
    CountStep,
    Pass,
)

if TYPE_CHECKING:
    from scrape_pipeline.reconciler import ReconcileReport

# How far below the watermark the count check reaches (at least twice the overlap): a job
# listed later than this after the newest listed one is beyond it.
LATE_CHECK_SECONDS = 1800.0


@dataclass(frozen=True)
class JobListSettings(FromEnv):
    """The job-list sweep's knobs (each field is its declaration)."""

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
        "delays newer jobs (`scrape_pipeline.joblist`)",
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


@dataclass
class JobListResult(SweepResult):
    """What one sweep did."""

    watched: int = 0  # unsettled jobs recorded WATCHING for the watch sweep
    list_pages: int = 0
    fresh_passes: int = 0  # passes begun at the watermark this run (opening, closing)
    resumed_passes: int = 0  # pending passes taken up where an earlier run left them
    jobs_seen: int = 0
    watermark: float = 0.0
    listing_lag: float = 0.0  # the measured listing lag (module docstring), seconds
    count_queries: int = 0  # one-job pages asked for their count (the count check)
    late_checks_found: int = 0  # count checks that found jobs listed late below the overlap

    def add_to(self, report: ReconcileReport) -> None:
        report.newly_watched += self.watched
        report.list_pages += self.list_pages
        report.list_passes += self.fresh_passes
        report.resumed_passes += self.resumed_passes
        report.jobs_seen += self.jobs_seen
        report.watermark = self.watermark
        report.listing_lag = self.listing_lag


class JobListSweep(Sweep[JobListSettings, JobListResult]):
    """Reads the job list in passes (module docstring) and ensures the settled jobs."""

    name = SOURCE_JOB_LIST

    def new_result(self) -> JobListResult:
        return JobListResult()

    def work(self, budget: Budget, result: JobListResult) -> None:
        """Work through fresh and pending passes until done or ``budget`` is spent.

        The checkpoint is saved whatever happens, so a page that failed (API or AWS) is where
        the next run resumes, and the pages read before it are not read again.
        """
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

    def _passes(self, mark: Checkpoint, budget: Budget, result: JobListResult) -> bool:
        """Fresh ground, the pending passes, then the closing pass (module docstring) while
        ``budget`` lasts; True when cut short."""
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
        """The end of a fresh pass, if time passed since the last one (the watermark is a
        job's time, on the API's clock, so it says nothing of whether time passed)."""
        end = self._clock.time() - self.settings.threshold_seconds
        return end if end > max(mark.watermark, mark.fresh_end) else None

    def _pending_pass(self, mark: Checkpoint, budget: Budget, result: JobListResult) -> bool:
        """Resume the oldest pending pass (left by an earlier run); True when cut short: it
        had the whole budget, so it stays pending where the budget ran out."""
        if self._stopped(budget, result):
            return True
        result.resumed_passes += 1
        current = mark.pending[0]
        self._read(current, mark, budget, result)
        mark.drop_finished()
        return not current.done

    def _fresh_pass(self, mark: Checkpoint, budget: Budget, result: JobListResult) -> bool:
        """Read the new ground, if any, in a fresh pass; True when the run is cut short."""
        fresh_end = self._new_ground(mark)
        if fresh_end is None:
            return False
        if self._stopped(budget, result):
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
        return not current.done and self._stopped(budget, result)

    def _fresh(
        self, mark: Checkpoint, end: float, result: JobListResult
    ) -> tuple[Pass, bool, Counted]:
        """A fresh pass up to ``end``, pending until it completes (after the count check);
        with whether it confirms the overlap, and the count check under way."""
        s = self.settings
        overlap = mark.overlap(s.overlap_seconds)
        counting = self._count_check(mark, mark.watermark - overlap, result)
        current = Pass(mark.watermark - overlap, end, fresh=True)
        # Read again once the spread of the lag has passed since the watermark moved, the
        # overlap is done with, unless this pass moves it again.
        since_moved = end + s.threshold_seconds - mark.moved_at
        mark.pending.append(current)  # the newest pass until it completes
        result.fresh_passes += 1
        return current, bool(overlap) and since_moved >= overlap, counting

    def _count_check(self, mark: Checkpoint, start: float, result: JobListResult) -> Counted:
        """Before a fresh pass from ``start``, as ``Checkpoint.count_step`` says: count again
        the range counted last, if due (more jobs there now were listed late, below any fresh
        pass: the range is read again, first of the pending passes), and the late window below
        ``start`` anew if the range reaches too deep or stops short of ``start`` (module
        docstring); the range the pass extends."""
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
        recount = self._count(counted.low, counted.top, result)
        if recount > counted.count:
            result.late_checks_found += 1
            mark.pending.insert(0, counted.reread())
        mark.counted_at = now
        if step is CountStep.RECOUNT:
            return counted.recounted(recount, mark.watermark)
        floor = int(mark.watermark - window)
        base = Counted(floor, split, self._count(floor, split, result))
        return base.recounted(base.count, mark.watermark)

    def _late_window(self, mark: Checkpoint) -> float:
        """How far below the watermark the count check reaches (LATE_CHECK_SECONDS, or twice
        the overlap)."""
        return max(LATE_CHECK_SECONDS, LAG_MARGIN * mark.overlap(self.settings.overlap_seconds))

    def _count(self, start: int, end: int, result: JobListResult) -> int:
        """The jobs the API lists created in [start, end] (whole seconds, both counted): one
        page of one job, whose page count is the count; none asked for an empty range."""
        if start > end:
            return 0
        result.count_queries += 1
        page = self._client.list_jobs(start_date=start, end_date=end, page=1, page_size=1)
        return page.page_count if page.items else 0

    def _stopped(self, budget: Budget, result: JobListResult) -> bool:
        """Out of time, or at the page cap (the budget's, ``work`` sets it) in list pages."""
        return budget.spent(result.list_pages)

    def _read(
        self,
        current: Pass,
        mark: Checkpoint,
        budget: Budget,
        result: JobListResult,
        *,
        confirming: bool = False,
    ) -> None:
        """Read ``current`` from its page while time and pages last; a page counts as read
        only once its jobs are handled, so a failure leaves ``current.page`` on it, and the
        checkpoint is saved after each page (a run killed mid-pass loses at most that page).

        One BatchGetItem a page (a page holds at most 100 jobs, BatchGetItem's limit): settled
        jobs the ledger has not finished are enqueued, unsettled ones it does not know are
        recorded WATCHING. In a fresh pass, a job the ledger does not know created below the
        watermark it began at was listed late: how far below is a listing-lag sample.
        """
        # A fresh pass measures from the watermark it began at, a re-read from its parts'.
        began_at = mark.watermark
        lag_base = (lambda _: began_at) if current.fresh else current.lag_base
        while not self._stopped(budget, result):
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
            if passes.ends(listing):
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
        result: JobListResult,
    ) -> dict[JobKey, float]:
        """One page's jobs handled with one BatchGetItem: the settled ones ensured (the
        recoverer decides), the running ones as ``decide`` says (parked WATCHING, or
        reopened); returns when each job was created."""
        settled, running, created_at = _sorted(items, current)
        rows = self._ledger.get_many([*settled, *running])
        lag = _listing_lag(lag_base, created_at, rows)
        if lag > 0:
            mark.measured(lag, self._clock.time())
        now = self._clock.time()
        reopen: list[JobKey] = []
        unknown: dict[JobKey, float] = {}
        for key, created in running.items():
            # The list proves a job closed as "unknown" exists; one it does not know is parked.
            move = decide(rows.get(key), _RUNNING, now, _POLICY).move
            if move is lifecycle.REOPEN:
                reopen.append(key)
            elif move is lifecycle.RECORD:
                unknown[key] = created
        result.recovered += self._recoverer.ensure_many(
            [*settled, *reopen], rows, source=Source.JOB_LIST
        )
        result.watched += self._recoverer.watch_many(unknown, source=Source.WATCH)
        return created_at


# What the job list shows of a job it lists unsettled (it decides nothing by age).
_RUNNING = Evidence(Seen.LISTED_RUNNING, Source.JOB_LIST)
_POLICY = Policy()


def _sorted(
    items: Sequence[JobSummary], current: Pass
) -> tuple[list[JobKey], dict[JobKey, float], dict[JobKey, float]]:
    """A page's settled jobs, its running ones and every job's creation time (``current``
    notes each job it saw, for a fresh pass's count check)."""
    settled: list[JobKey] = []
    running: dict[JobKey, float] = {}
    created_at: dict[JobKey, float] = {}
    for item in items:
        key = JobKey(JobKind.EXTRACT, item.job_id)
        # A job listed without its creation time counts as created at the range's start, so
        # inside the range read.
        created_at[key] = current.seen[item.job_id] = passes.created(item, current.start)
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
    """A listing-lag sample: how far below its ``lag_base`` (the watermark it was unlisted at;
    None: no sample) the job the ledger does not know furthest below was created; 0 when none
    was listed late."""
    samples = [
        base - c
        for key, c in created_at.items()
        if key not in known and (base := lag_base(c)) is not None
    ]
    return max(samples, default=0.0)
