"""The reconciler: find every job the webhooks missed, enqueue it, and count them.

Four sweeps, each bounded and resumable:

    job list      the extract job list in passes (``scrape_pipeline.joblist``): the fresh
                  ground since the watermark (minus an overlap) up to now - threshold first,
                  then passes earlier runs left pending, until the time share is spent; a
                  settled job the ledger has not finished is enqueued, an unsettled one it
                  does not know is recorded WATCHING (left to the watch sweep).
    stuck rows    RECEIVED/ENQUEUED rows unchanged for ``stale_after``, PROCESSING rows with
                  an expired lease (the sparse ``pending-by-state`` index).
    delivery log  per subscription, attempts since a checkpoint that failed, were abandoned
                  or got a non-2xx answer: the job is made sure of.
    watch         WATCHING rows (jobs running for hours or days) whose job has settled are
                  woken: see ``scrape_pipeline.watch``.

The counts by sweep are the measured webhook gap (metric ``JobsRecovered``, by source).

Cadence: the schedule runs the reconciler every minute; the watch sweep runs every run. The
stuck-rows and delivery-log sweeps are slower kinds of evidence (a lost message waits
STALE_AFTER anyway; a failed delivery is retried by the sender for minutes): they run once
every RECONCILE_FULL_SWEEP seconds, and at every run while their last one is unfinished (cut
short or failed), so a backlog is worked through at the full pace. The job list adapts to the
measured gap: while a run has recovered a job within RECONCILE_GAP_MEMORY, webhooks are going
missing and it runs every run, so a lost webhook's job is found once it has been settled for
the threshold (60 s); once webhooks have been complete that long, it falls back to the full
cadence. A run costs what came due since the last (one list page per 100 jobs, at least
one), so the every-minute mode costs at most one page a minute more than the 10-minute one:
1,440 pages a day, paid only while webhooks go missing. The first lost webhook after a quiet
spell waits for the next full run (up to RECONCILE_FULL_SWEEP); every one after it, a minute.
A first run counts as a gap: a new deployment is watched every minute until proved complete.

Every sweep has its own share of the run's time (taken from the Lambda's remaining time) and
its own error handling: one that runs out of time stops at a page boundary and saves where it
stopped; one that fails is named in the report and the next sweep still runs. Work follows the
volume: no sweep stops at a page count (RECONCILE_MAX_PAGES is a high safety cap), and the jobs
found are recovered in batches (``Recoverer.ensure_many``: concurrent conditional puts, then
SendMessageBatch ten at a time).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.budget import (
    DEFAULT_MAX_PAGES,
    Budget,
    RemainingSeconds,
    safety_margin,
    unlimited,
)
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.client import DELIVERIES_PAGE_MAX, GeonodeClient
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.joblist import JobListSettings, JobListSweep
from scrape_pipeline.jobs import (
    SOURCE_DELIVERY_LOG,
    SOURCE_JOB_LIST,
    SOURCE_WATCH,
    JobKey,
    JobState,
    Source,
)
from scrape_pipeline.ledger import Bookkeeping, Ledger
from scrape_pipeline.payload import EVENT_KINDS
from scrape_pipeline.recovery import Recoverer
from scrape_pipeline.settings import read_float, read_int
from scrape_pipeline.watch import Watcher, WatchSettings

SOURCE_STUCK_ROWS: str = Source.STUCK_ROWS
DELIVERIES_CHECKPOINT_PREFIX = "deliveries-"
# When each slow sweep last finished a run (bookkeeping row): the cadence's memory.
CADENCE_CHECKPOINT = "reconciler-cadence"
# The order sweeps run in: most specific evidence first, so the gap is attributed to its cause.
# The job list goes last: time flows only forward, and the watch sweep, cheap, leaves nearly
# all of its share to it (the job list at 50 jobs/s with every webhook lost needs it). The
# unsettled jobs the job list records WATCHING are woken from the next run on.
SWEEPS = (SOURCE_STUCK_ROWS, SOURCE_DELIVERY_LOG, SOURCE_WATCH, SOURCE_JOB_LIST)
# The sweeps that run at the full-sweep cadence, not every run (module docstring).
SLOW_SWEEPS = frozenset({SOURCE_STUCK_ROWS, SOURCE_DELIVERY_LOG})
# The sweep that runs every minute while the webhook gap is open, at the slow cadence otherwise.
ADAPTIVE_SWEEPS = frozenset({SOURCE_JOB_LIST})
# The sweeps whose last finished run the cadence row remembers.
CADENCED_SWEEPS = SLOW_SWEEPS | ADAPTIVE_SWEEPS
# Cadence row field: when a run last recovered a job (the measured gap was open).
GAP_SEEN = "gap_seen_at"
# Schedules fire a little early or late: a sweep due "every 600 s" at runs 599.5 s apart
# must not wait for the next run, a whole schedule period later.
CADENCE_SLACK = 5.0
# What a sweep may fail with and the run survive: the API's errors and AWS being unavailable.
SWEEP_ERRORS = (GeonodeError, AWSUnavailableError)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcilerSettings:
    """The reconciler's knobs (environment variables in brackets).

    | variable | default | why |
    |---|---|---|
    | RECONCILE_THRESHOLD_SECONDS | 60 | younger jobs may still get their webhook |
    | RECONCILE_OVERLAP_SECONDS | 30 | re-read below the watermark (lag spread, 2x lag seen) |
    | RECONCILE_FULL_SWEEP_SECONDS | 600 | stuck rows and delivery log run this often (and on) |
    | RECONCILE_GAP_MEMORY_SECONDS | 900 | the job list runs every minute this long after a gap |
    | DELIVERY_OVERLAP_SECONDS | 60 | re-read this much of the delivery log (same-second ties) |
    | STALE_AFTER_SECONDS | 900 | a RECEIVED/ENQUEUED row unchanged this long lost its message |
    | RECONCILE_MAX_PAGES | 1000 | pages per run and sweep: a safety cap; time shares bound work |
    | RECONCILE_LOOKBACK_SECONDS | 86400 | how far back the first run looks (newest first) |
    | RECONCILE_ROWS_PER_STATE | 200 | stuck rows per ledger page (pages capped as API pages) |
    | WATCH_POLL_SECONDS | 3600 | a watched batch or crawl (the API lists neither) is polled |
    | DELIVERY_PAGE_SIZE | 100 | delivery-log rows a page (the API's maximum; smaller in tests) |
    | RECONCILE_SAFETY_MARGIN_SECONDS | 20 | kept back from the Lambda's time: last page, writes |
    | RECONCILE_SHARE_STUCK_ROWS | 0.2 | weight of the stuck-rows sweep in the run's time |
    | RECONCILE_SHARE_DELIVERY_LOG | 0.4 | weight of the delivery-log sweep |
    | RECONCILE_SHARE_JOB_LIST | 0.4 | weight of the job-list sweep |
    | RECONCILE_SHARE_WATCH | 0.1 | weight of the watch sweep |

    Each sweep gets its weight's fraction of the time left when it starts (weights of the sweeps
    still to run), so time one sweep leaves unused flows to the next; the last takes the rest.
    Sweeps stop at page boundaries, so the margin covers the page under way when a share runs
    out and the checkpoint writes after it. A page stuck in the client's retries (up to 30 s)
    can still overrun it; the timeout then costs only that run's unsaved progress. The margin
    stays below the local stack's Lambda context (30 s left, always), which would otherwise
    leave the sweeps no time at all.
    """

    threshold_seconds: float = 60.0
    overlap_seconds: float = 30.0
    full_sweep_seconds: float = 600.0
    gap_memory_seconds: float = 900.0
    delivery_overlap_seconds: float = 60.0
    stale_after_seconds: float = 900.0
    max_pages: int = DEFAULT_MAX_PAGES
    lookback_seconds: float = 86_400.0
    rows_per_state: int = 200
    watch_poll_seconds: float = 3600.0
    delivery_page_size: int = DELIVERIES_PAGE_MAX
    safety_margin_seconds: float = 20.0
    share_stuck_rows: float = 0.2
    share_delivery_log: float = 0.4
    share_job_list: float = 0.4
    share_watch: float = 0.1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReconcilerSettings:
        """Read the settings; ``SettingsError`` names a bad value (an integer given "2.5" too)."""
        env = os.environ if env is None else env

        def num(name: str, default: float) -> float:
            return read_float(env, name, default)

        return cls(
            threshold_seconds=num("RECONCILE_THRESHOLD_SECONDS", cls.threshold_seconds),
            overlap_seconds=num("RECONCILE_OVERLAP_SECONDS", cls.overlap_seconds),
            full_sweep_seconds=num("RECONCILE_FULL_SWEEP_SECONDS", cls.full_sweep_seconds),
            gap_memory_seconds=num("RECONCILE_GAP_MEMORY_SECONDS", cls.gap_memory_seconds),
            delivery_overlap_seconds=num("DELIVERY_OVERLAP_SECONDS", cls.delivery_overlap_seconds),
            stale_after_seconds=num("STALE_AFTER_SECONDS", cls.stale_after_seconds),
            max_pages=read_int(env, "RECONCILE_MAX_PAGES", cls.max_pages),
            lookback_seconds=num("RECONCILE_LOOKBACK_SECONDS", cls.lookback_seconds),
            rows_per_state=read_int(env, "RECONCILE_ROWS_PER_STATE", cls.rows_per_state),
            watch_poll_seconds=num("WATCH_POLL_SECONDS", cls.watch_poll_seconds),
            delivery_page_size=read_int(
                env, "DELIVERY_PAGE_SIZE", cls.delivery_page_size, maximum=DELIVERIES_PAGE_MAX
            ),
            safety_margin_seconds=num("RECONCILE_SAFETY_MARGIN_SECONDS", cls.safety_margin_seconds),
            share_stuck_rows=num("RECONCILE_SHARE_STUCK_ROWS", cls.share_stuck_rows),
            share_delivery_log=num("RECONCILE_SHARE_DELIVERY_LOG", cls.share_delivery_log),
            share_job_list=num("RECONCILE_SHARE_JOB_LIST", cls.share_job_list),
            share_watch=num("RECONCILE_SHARE_WATCH", cls.share_watch),
        )

    def share(self, sweep: str) -> float:
        """The weight of ``sweep`` (one of ``SWEEPS``) in the run's time."""
        return {
            SOURCE_STUCK_ROWS: self.share_stuck_rows,
            SOURCE_DELIVERY_LOG: self.share_delivery_log,
            SOURCE_JOB_LIST: self.share_job_list,
            SOURCE_WATCH: self.share_watch,
        }[sweep]


@dataclass
class ReconcileReport:
    """What one run found and did."""

    recovered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SWEEPS, 0))
    list_pages: int = 0
    watch_list_pages: int = 0  # of list_pages, the watch sweep's (unsettled jobs)
    watch_listings: int = 0  # listings of the unsettled jobs the watch sweep finished
    list_passes: int = 0  # job-list passes begun at the watermark (fresh ground)
    delivery_pages: int = 0
    row_pages: int = 0
    # Passes taken up where an earlier run saved them (job list, one per subscription's log).
    resumed_passes: int = 0
    jobs_seen: int = 0
    watched: int = 0  # WATCHING rows read by the watch sweep
    newly_watched: int = 0  # unsettled jobs the job list recorded WATCHING
    # Sweeps not due this run (RECONCILE_FULL_SWEEP): they ran recently and finished.
    skipped: list[str] = field(default_factory=list)
    # The job list runs every minute: a run recovered a job within RECONCILE_GAP_MEMORY.
    gap_open: bool = False
    watermark: float = 0.0  # the job list's: the newest created_at listed, on the API's clock
    listing_lag: float = 0.0  # the job list's measured listing lag, seconds
    # False when a budget ran out or a sweep failed: the next run carries on from the checkpoints.
    complete: bool = True
    # sweep -> what failed; the other sweeps ran all the same.
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def total_recovered(self) -> int:
        """Jobs enqueued by this run, all sweeps together."""
        return sum(self.recovered.values())


@dataclass(frozen=True)
class _DeliveryCheckpoint:
    """One subscription's delivery-log sweep state, one ledger bookkeeping row.

    Fields: ``checkpoint`` (attempts older than it minus the overlap were read) and, while a
    pass is cut short, ``pass_low``, ``pass_high`` and ``pass_page``: the pass's bounds and
    the page the next run reads first.
    """

    checkpoint: float
    # (lower bound, upper bound, next page) of a pass cut short
    resume: tuple[float, float, int] | None

    @classmethod
    def read(cls, saved: Mapping[str, str] | None, default: float) -> _DeliveryCheckpoint:
        if not saved:
            return cls(default, None)
        resume = None
        if saved.get("pass_page"):
            resume = (
                float(saved["pass_low"]),
                float(saved["pass_high"]),
                int(saved["pass_page"]),
            )
        return cls(float(saved["checkpoint"]), resume)

    def fields(self) -> dict[str, str]:
        out = {"checkpoint": f"{self.checkpoint:.3f}"}
        if self.resume is not None:
            low, high, page = self.resume
            out.update(pass_low=f"{low:.3f}", pass_high=f"{high:.3f}", pass_page=str(page))
        return out


@dataclass
class _Scan:
    """What one stretch of delivery-log pages gave."""

    keys: list[JobKey]
    newest: float | None  # the newest attempt seen: a fresh pass's upper bound
    next_page: int | None  # where to go on; None once the lower bound or the end was reached
    error: GeonodeError | None = None  # the page read that failed, after the pages before it


class Reconciler:
    """One reconciliation run at a time (the template reserves a concurrency of one)."""

    def __init__(
        self,
        settings: ReconcilerSettings,
        *,
        ledger: Ledger,
        client: GeonodeClient,
        recoverer: Recoverer,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._books = Bookkeeping(ledger)
        self._client = client
        self._recoverer = recoverer
        self._clock = clock
        self._job_list = JobListSweep(
            JobListSettings(
                threshold_seconds=settings.threshold_seconds,
                overlap_seconds=settings.overlap_seconds,
                lookback_seconds=settings.lookback_seconds,
                max_pages=settings.max_pages,
            ),
            ledger=ledger,
            client=client,
            recoverer=recoverer,
            clock=clock,
        )
        self._watcher = Watcher(
            WatchSettings(
                poll_seconds=settings.watch_poll_seconds,
                first_poll_seconds=settings.threshold_seconds,
                listing_lag_seconds=settings.overlap_seconds,
                max_pages=settings.max_pages,
            ),
            ledger=ledger,
            client=client,
            recoverer=recoverer,
            clock=clock,
        )

    def run(
        self, remaining: RemainingSeconds = unlimited, *, full: bool = False
    ) -> ReconcileReport:
        """The sweeps due (all four with ``full``), each in its share of ``remaining()`` less
        the safety margin.

        ``remaining`` gives the seconds the invocation has left (the handler passes the Lambda
        context's); without it only the page caps bound the run. A sweep that fails is
        recorded in ``report.errors`` and the next one still runs. Nothing is raised: a raise
        makes Lambda retry the whole run twice, repeating the sweeps that worked, while the
        failed one resumes from its checkpoint on the next scheduled run anyway.
        """
        report = ReconcileReport()
        margin = safety_margin(remaining, self.settings.safety_margin_seconds)

        def usable() -> float:
            return remaining() - margin

        run_budget = Budget(usable, usable())
        sweeps: dict[str, Callable[[ReconcileReport, Budget], None]] = {
            SOURCE_STUCK_ROWS: self.sweep_stuck_rows,
            SOURCE_DELIVERY_LOG: self.sweep_delivery_log,
            SOURCE_JOB_LIST: self.sweep_job_list,
            SOURCE_WATCH: self.sweep_watched,
        }
        started = self._clock.time()
        cadence = self._books.read(CADENCE_CHECKPOINT) or {}
        due = [name for name in SWEEPS if full or self._due(name, cadence, started)]
        report.skipped = [name for name in SWEEPS if name not in due]
        finished: dict[str, str] = {}
        weights = [self.settings.share(name) for name in due]
        for index, name in enumerate(due):
            budget = run_budget.share(weights[index:])
            complete_before, report.complete = report.complete, True
            try:
                sweeps[name](report, budget)
            except SWEEP_ERRORS as exc:
                report.errors[name] = f"{type(exc).__name__}: {exc}"
                report.complete = False
                logger.warning("reconciler sweep %s failed: %s", name, report.errors[name])
            if report.complete and name in CADENCED_SWEEPS:
                finished[name] = f"{started:.3f}"
            report.complete &= complete_before
        if report.total_recovered or GAP_SEEN not in cadence:
            # A first run knows nothing of the gap yet: it starts open, so a new deployment
            # is watched closely until its webhooks have proved complete.
            finished[GAP_SEEN] = f"{started:.3f}"
        report.gap_open = self._gap_open({**cadence, **finished}, started)
        if finished:
            self._books.write(CADENCE_CHECKPOINT, {**cadence, **finished})
        return report

    def _due(self, sweep: str, cadence: Mapping[str, str], now: float) -> bool:
        """The watch sweep always; the job list always while the gap is open; the others (and
        the job list when webhooks have been complete for ``gap_memory_seconds``) once
        ``full_sweep_seconds`` after their last finished run began, so also at every run
        while their last one is unfinished."""
        if sweep in ADAPTIVE_SWEEPS and self._gap_open(cadence, now):
            return True
        if sweep not in CADENCED_SWEEPS or not cadence.get(sweep):
            return True
        return now - float(cadence[sweep]) >= self.settings.full_sweep_seconds - CADENCE_SLACK

    def _gap_open(self, cadence: Mapping[str, str], now: float) -> bool:
        """A run recovered a job less than ``gap_memory_seconds`` ago: webhooks go missing."""
        seen = cadence.get(GAP_SEEN)
        return bool(seen) and now - float(seen or 0.0) < self.settings.gap_memory_seconds

    # -- job list --------------------------------------------------------------------------

    def sweep_job_list(self, report: ReconcileReport, budget: Budget | None = None) -> None:
        """Enqueue settled jobs older than the threshold that the ledger has not finished.

        Fresh ground first, then the passes earlier runs left pending, until the budget is
        spent: see ``scrape_pipeline.joblist`` for the pass order and the watermark rule.
        """
        result = self._job_list.sweep(budget or Budget.no_deadline())
        report.recovered[SOURCE_JOB_LIST] += result.recovered
        report.newly_watched += result.watched
        report.list_pages += result.list_pages
        report.list_passes += result.fresh_passes
        report.resumed_passes += result.resumed_passes
        report.jobs_seen += result.jobs_seen
        report.watermark = result.watermark
        report.listing_lag = result.listing_lag
        report.complete &= result.complete

    # -- watched jobs ----------------------------------------------------------------------

    def sweep_watched(self, report: ReconcileReport, budget: Budget | None = None) -> None:
        """Wake the long-running jobs that have settled (see ``scrape_pipeline.watch``)."""
        result = self._watcher.sweep(budget or Budget.no_deadline())
        report.recovered[SOURCE_WATCH] += result.woken
        report.row_pages += result.row_pages
        report.list_pages += result.list_pages
        report.watch_list_pages += result.list_pages
        report.watch_listings += result.listings
        report.watched = result.watched
        report.complete &= result.complete

    # -- stuck rows ------------------------------------------------------------------------

    def sweep_stuck_rows(self, report: ReconcileReport, budget: Budget | None = None) -> None:
        """Re-enqueue rows whose message was lost and leases whose holder died.

        Each state's rows are read oldest first (the index is ordered by ``state_since``),
        page after page while the budget and the page cap last. No cursor is kept between
        runs: a fresh query from the oldest is the resume point, because every RECEIVED or
        ENQUEUED row handled leaves the range (``mark_enqueued`` stamps it now, newer than
        ``stale_after`` ago), so the next run's first page starts where this run stopped.
        PROCESSING rows do not move when their message is re-sent, but there are only as many
        as leases taken recently, far fewer than a page cap of pages.
        """
        budget = budget or Budget.no_deadline()
        now = self._clock.time()
        stale_before = now - self.settings.stale_after_seconds
        # A lease lasts far less than STALE_AFTER; rows leased before now may have expired.
        ranges = (
            (JobState.RECEIVED, stale_before),
            (JobState.ENQUEUED, stale_before),
            (JobState.PROCESSING, now),
        )
        for state, before in ranges:
            if not self._sweep_state(state, before, report, now=now, budget=budget):
                report.complete = False
                return  # out of time: the next run starts again from the oldest

    def _sweep_state(
        self,
        state: JobState,
        before: float,
        report: ReconcileReport,
        *,
        now: float,
        budget: Budget,
    ) -> bool:
        """Handle ``state``'s rows older than ``before``; False when cut short."""
        cursor: dict[str, object] | None = None
        for _ in range(self.settings.max_pages):
            if budget.spent():
                return False
            rows, cursor = self._ledger.pending(
                state, since_before=before, limit=self.settings.rows_per_state, cursor=cursor
            )
            report.row_pages += 1
            due = {
                row.key: row
                for row in rows
                if state is not JobState.PROCESSING or row.lease_expired(now)
            }
            report.recovered[SOURCE_STUCK_ROWS] += self._recoverer.ensure_many(
                list(due), due, source=SOURCE_STUCK_ROWS
            )
            if cursor is None:
                return True
        return False

    # -- delivery log ----------------------------------------------------------------------

    def sweep_delivery_log(self, report: ReconcileReport, budget: Budget | None = None) -> None:
        """Make sure of every job whose delivery failed, subscription by subscription.

        Only attempts the log marks ``failed`` are read (the API filters them), so a run costs
        one page per subscription when deliveries go well; every abandoned delivery had failed
        attempts before it. Each subscription gets an equal share of the sweep's time (what
        one leaves flows to the next), so one deep backlog cannot starve the others.
        """
        budget = budget or Budget.no_deadline()
        hooks = self._client.list_webhooks()
        for index, hook in enumerate(hooks):
            share = budget.share([1.0] * (len(hooks) - index))
            self._sweep_subscription(hook.id, report, share)

    def _sweep_subscription(self, webhook_id: str, report: ReconcileReport, budget: Budget) -> None:
        """One subscription's log, in passes that resume where the last run stopped.

        A pass covers [checkpoint - overlap, the newest attempt on its first page], newest
        first. Cut short (pages or time), it saves its bounds and next page; the next run
        resumes there before anything else. The log grows at the top while a pass is under
        way: new failures push older rows down, so the saved page number now shows rows a
        little newer than where the pass stopped. Resuming by page number therefore re-reads
        a few rows and never skips one: rows are only ever added, never removed, so a row can
        move down a page and never up one (an attempt that fails late lands among older rows,
        which again only pushes rows down). Only a pass that reaches
        its lower bound moves the checkpoint, to its upper bound. A run that finishes a
        resumed pass starts a fresh one (the failures since) while its budget lasts.
        """
        s = self.settings
        name = f"{DELIVERIES_CHECKPOINT_PREFIX}{webhook_id}"
        saved = self._books.read(name)
        mark = _DeliveryCheckpoint.read(saved, self._clock.time() - s.lookback_seconds)
        pages_before = report.delivery_pages
        failure: GeonodeError | None = None
        while True:
            if mark.resume is not None:
                low, high, page = mark.resume
                report.resumed_passes += 1
            else:
                low, high, page = mark.checkpoint - s.delivery_overlap_seconds, None, 1
            pages_left = s.max_pages - (report.delivery_pages - pages_before)
            scan = self._scan_failed(
                webhook_id, low, page, report, budget=budget, max_pages=pages_left
            )
            report.recovered[SOURCE_DELIVERY_LOG] += self._ensure(scan.keys, SOURCE_DELIVERY_LOG)
            high = high if high is not None else scan.newest
            failure = scan.error
            if scan.next_page is not None:
                if high is not None:  # nothing read yet: nothing to resume
                    mark = _DeliveryCheckpoint(mark.checkpoint, (low, high, scan.next_page))
                report.complete = False
                break
            resumed = mark.resume is not None
            mark = _DeliveryCheckpoint(max(mark.checkpoint, high or mark.checkpoint), None)
            if not resumed or budget.spent() or report.delivery_pages - pages_before >= s.max_pages:
                break
        if mark.fields() != (saved or {}):
            self._books.write(name, mark.fields())
        if failure is not None:
            raise failure  # after saving the pages read before it

    def replay_failed(
        self,
        webhook_id: str,
        *,
        since: float,
        report: ReconcileReport,
        only_status: int | None = None,
        source: str = SOURCE_DELIVERY_LOG,
    ) -> int:
        """Ensure the jobs of failed deliveries since ``since``; ``only_status`` narrows (401)."""
        scan = self._scan_failed(
            webhook_id,
            since,
            1,
            report,
            budget=Budget.no_deadline(),
            max_pages=self.settings.max_pages,
            only_status=only_status,
        )
        if scan.error is not None:
            raise scan.error
        report.complete &= scan.next_page is None
        return self._ensure(scan.keys, source)

    def _scan_failed(
        self,
        webhook_id: str,
        low: float,
        page: int,
        report: ReconcileReport,
        *,
        budget: Budget,
        max_pages: int,
        only_status: int | None = None,
    ) -> _Scan:
        """Jobs of failed attempts from ``page`` down to ``low``, while pages and time last.

        A failing page read ends the scan with the error, keeping what the pages before gave.
        """
        keys: list[JobKey] = []
        newest: float | None = None

        def scan(next_page: int | None, error: GeonodeError | None = None) -> _Scan:
            return _Scan(list(dict.fromkeys(keys)), newest, next_page, error)

        for _ in range(max_pages):
            if budget.spent():
                break
            try:
                listing = self._client.list_deliveries(
                    webhook_id,
                    status="failed",
                    page=page,
                    page_size=self.settings.delivery_page_size,
                )
            except GeonodeError as exc:
                return scan(page, exc)
            report.delivery_pages += 1
            for delivery in listing.items:
                created = delivery.created_at.timestamp() if delivery.created_at else low
                if created < low:
                    return scan(None)
                newest = created if newest is None else max(newest, created)
                if only_status is not None and delivery.http_status != only_status:
                    continue
                kind = EVENT_KINDS.get(delivery.event_type)
                if kind is not None and delivery.job_id:
                    keys.append(JobKey(kind, delivery.job_id))
            if listing.is_last or not listing.items:
                return scan(None)
            page += 1
        return scan(page)

    # -- shared ----------------------------------------------------------------------------

    def _ensure(self, keys: Sequence[JobKey], source: str) -> int:
        """Ensure ``keys`` a hundred at a time: one BatchGetItem, then batched recovery."""
        recovered = 0
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            recovered += self._recoverer.ensure_many(
                chunk, self._ledger.get_many(chunk), source=source
            )
        return recovered
