"""The reconciler: find every job the webhooks missed, enqueue it, and count them.

Six sweeps, each bounded and resumable:

    outbox        outcomes whose event a crash kept from the bus, emitted with their ids
                  (``scrape_pipeline.sweeps.outbox``).
    runs          submission runs whose every URL settled: their manifest, once, and their
                  Run Completed event (``scrape_pipeline.sweeps.runs``).
    job list      the extract job list in passes (``scrape_pipeline.joblist``): the fresh
                  ground since the watermark (minus an overlap) up to now - threshold first,
                  then passes earlier runs left pending, until the time share is spent; a
                  settled job the ledger has not finished is enqueued, an unsettled one it
                  does not know is recorded WATCHING (left to the watch sweep).
    stuck rows    RECEIVED/ENQUEUED rows unchanged for ``stale_after``, PROCESSING rows with
                  an expired lease (``scrape_pipeline.sweeps.stuck_rows``).
    delivery log  per subscription, attempts since a checkpoint that failed, were abandoned
                  or got a non-2xx answer: the job is made sure of
                  (``scrape_pipeline.sweeps.delivery_log``).
    watch         WATCHING rows (jobs running for hours or days) whose job has settled are
                  woken: see ``scrape_pipeline.watch``.

The counts by sweep are the measured webhook gap (metric ``JobsRecovered``, by source).
After the sweeps, a run measures its lag: how long the oldest RECEIVED/ENQUEUED/PROCESSING
row has waited (``scrape_pipeline.unsettled``). The handler emits it, the failed sweeps and a
heartbeat for the alarms on the reconciler itself (``scrape_pipeline.reconcile_metrics``).

Each is a ``scrape_pipeline.sweeps.Sweep``; ``SWEEP_TABLE`` lists them in the order they run,
with their share of the run's time and their cadence: a new sweep is one class and one row.

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
stopped; one that fails is named in the report (with the work it did before) and the next
sweep still runs. Work follows the volume: no sweep stops at a page count (RECONCILE_MAX_PAGES
is a high safety cap), and the jobs found are recovered in batches (``Recoverer.ensure_many``:
concurrent conditional puts, then SendMessageBatch ten at a time).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from scrape_pipeline.budget import Budget, RemainingSeconds, safety_margin, unlimited
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.geonode.client import DELIVERIES_PAGE_MAX, GeonodeClient
from scrape_pipeline.joblist import JobListSettings, JobListSweep
from scrape_pipeline.jobs import SOURCE_DELIVERY_LOG
from scrape_pipeline.ledger import Bookkeeping, Ledger
from scrape_pipeline.reconcile_cadence import CADENCE_CHECKPOINT, Cadence, CadenceRow
from scrape_pipeline.recovery import Recoverer, RecoverySettings
from scrape_pipeline.results import ResultStore
from scrape_pipeline.settings import FromEnv, declared, integer, number, read_declared
from scrape_pipeline.sweeps import SWEEP_ERRORS, Sweep, SweepParts, SweepResult
from scrape_pipeline.sweeps.delivery_log import DELIVERIES_CHECKPOINT_PREFIX, DeliveryLogSweep
from scrape_pipeline.sweeps.outbox import OutboxSweep
from scrape_pipeline.sweeps.runs import RunsSweep
from scrape_pipeline.sweeps.stuck_rows import SOURCE_STUCK_ROWS, StuckRowsSweep
from scrape_pipeline.unsettled import oldest_unsettled_age
from scrape_pipeline.watch import Watcher, WatchSettings

__all__ = [
    "DELIVERIES_CHECKPOINT_PREFIX",
    "SOURCE_STUCK_ROWS",
    "SWEEPS",
    "SWEEP_ERRORS",
    "SWEEP_TABLE",
    "ReconcileReport",
    "Reconciler",
    "ReconcilerSettings",
    "SweepRow",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcilerSettings(FromEnv):
    """The reconciler's knobs (each field is its declaration, or a sweep's settings).

    Each sweep gets its weight's fraction of the time left when it starts (weights of the sweeps
    still to run), so time one sweep leaves unused flows to the next; the last takes the rest.
    Sweeps stop at page boundaries, so the margin covers the page under way when a share runs
    out and the checkpoint writes after it. A page stuck in the client's retries (up to 30 s)
    can still overrun it; the timeout then costs only that run's unsaved progress. The margin
    stays below the local stack's Lambda context (30 s left, always), which would otherwise
    leave the sweeps no time at all.

    The job list's, the watch sweep's and recovery's own settings are held here (``job_list``,
    ``watch``, ``recovery``), each value read once: the watch sweep first polls at the
    threshold, and takes the job list's overlap as the listing lag it allows for.
    """

    job_list: JobListSettings = field(default_factory=JobListSettings)
    watch: WatchSettings = field(
        default_factory=lambda: WatchSettings(first_poll_seconds=JobListSettings.threshold_seconds)
    )
    recovery: RecoverySettings = field(default_factory=RecoverySettings)
    full_sweep_seconds: float = number(
        "RECONCILE_FULL_SWEEP_SECONDS",
        600.0,
        "the stuck-rows and delivery-log sweeps run this often, and at every run while "
        "unfinished (a backlog is worked at the full pace); the watch sweep runs every run",
    ).field()
    gap_memory_seconds: float = number(
        "RECONCILE_GAP_MEMORY_SECONDS",
        900.0,
        "the job list runs at every run (each minute) while a run has recovered a job within "
        "this long, and at the full-sweep cadence once webhooks have been complete for it. A "
        "first run counts as a gap, so a new deployment is watched every minute for its first "
        "15 minutes. Measured on the 1,000-job pipeline benchmark (no webhook dropped): see the "
        "Benchmarks section",
    ).field()
    delivery_overlap_seconds: float = number(
        "DELIVERY_OVERLAP_SECONDS",
        60.0,
        "the delivery log is re-read this far before its checkpoint",
    ).field()
    rows_per_state: int = integer(
        "RECONCILE_ROWS_PER_STATE", 200, "stuck rows per ledger page"
    ).field()
    delivery_page_size: int = integer(
        "DELIVERY_PAGE_SIZE",
        DELIVERIES_PAGE_MAX,
        "delivery-log rows per page: the API's maximum, so a backlog costs the fewest calls",
        maximum=DELIVERIES_PAGE_MAX,
    ).field()
    safety_margin_seconds: float = number(
        "RECONCILE_SAFETY_MARGIN_SECONDS",
        20.0,
        "of the Lambda's remaining time, kept back for one slow page call and the checkpoint "
        "writes",
    ).field()
    share_stuck_rows: float = number(
        "RECONCILE_SHARE_STUCK_ROWS",
        0.2,
        "weight of the stuck-rows sweep in the run's time: each sweep gets its weight's fraction "
        "of the time left when it starts, so time one leaves unused flows to the next",
    ).field()
    share_delivery_log: float = number(
        "RECONCILE_SHARE_DELIVERY_LOG", 0.4, "weight of the delivery-log sweep"
    ).field()
    share_job_list: float = number(
        "RECONCILE_SHARE_JOB_LIST",
        0.4,
        "weight of the job-list sweep (it runs last, so it takes what the others leave)",
    ).field()
    share_watch: float = number("RECONCILE_SHARE_WATCH", 0.1, "weight of the watch sweep").field()
    share_outbox: float = number(
        "RECONCILE_SHARE_OUTBOX", 0.05, "weight of the outbox sweep (it runs first)"
    ).field()
    share_runs: float = number(
        "RECONCILE_SHARE_RUNS", 0.05, "weight of the run sweep (runs' manifests and events)"
    ).field()
    outbox_grace_seconds: float = number(
        "OUTBOX_GRACE_SECONDS",
        90.0,
        "the outbox sweep emits an outcome's event once it has waited this long (a crash kept "
        "it from the bus): longer than a processor invocation (ProcessorTimeoutSeconds, at "
        "most 60), whose batch's events are still to be emitted by it",
    ).field()

    @property
    def threshold_seconds(self) -> float:
        """RECONCILE_THRESHOLD_SECONDS."""
        return self.job_list.threshold_seconds

    @property
    def overlap_seconds(self) -> float:
        """RECONCILE_OVERLAP_SECONDS."""
        return self.job_list.overlap_seconds

    @property
    def lookback_seconds(self) -> float:
        """RECONCILE_LOOKBACK_SECONDS."""
        return self.job_list.lookback_seconds

    @property
    def max_pages(self) -> int:
        """RECONCILE_MAX_PAGES."""
        return self.job_list.max_pages

    @property
    def stale_after_seconds(self) -> float:
        """STALE_AFTER_SECONDS (``RecoverySettings``)."""
        return self.recovery.stale_after_seconds

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """Read the settings; ``SettingsError`` names a bad value (an integer given "2.5" too)."""
        env = os.environ if env is None else env
        lists = JobListSettings.from_env(env)
        watch = WatchSettings(
            poll_seconds=declared(WatchSettings)["poll_seconds"].read(env),
            first_poll_seconds=lists.threshold_seconds,
            listing_lag_seconds=lists.overlap_seconds,
            max_pages=lists.max_pages,
        )
        recovery = RecoverySettings.from_env(env)
        return cls(job_list=lists, watch=watch, recovery=recovery, **read_declared(cls, env))


@dataclass(frozen=True)
class SweepRow:
    """One sweep of the run: its class, its weight in the run's time, its cadence, and the
    part of the reconciler's settings it is built with."""

    sweep: type[Sweep[Any, Any]]
    share: Callable[[ReconcilerSettings], float]
    cadence: Cadence
    settings: Callable[[ReconcilerSettings], object] = lambda s: s

    @property
    def name(self) -> str:
        """The sweep's name: its recovery source."""
        return self.sweep.name


# The order sweeps run in: most specific evidence first, so the gap is attributed to its cause.
# The job list goes last: time flows only forward, and the watch sweep, cheap, leaves nearly
# all of its share to it (the job list at 50 jobs/s with every webhook lost needs it). The
# unsettled jobs the job list records WATCHING are woken from the next run on.
SWEEP_TABLE: tuple[SweepRow, ...] = (
    # First: cheap (a scan of a sparse index holding only events a crash left), and late
    # events are what a subscriber waits for.
    SweepRow(OutboxSweep, lambda s: s.share_outbox, Cadence.EVERY_RUN),
    # Then the runs whose last job settled: their manifest and Run Completed (a scan of the
    # same sparse index, and a few reads per open run).
    SweepRow(RunsSweep, lambda s: s.share_runs, Cadence.EVERY_RUN),
    SweepRow(StuckRowsSweep, lambda s: s.share_stuck_rows, Cadence.FULL_SWEEP),
    SweepRow(DeliveryLogSweep, lambda s: s.share_delivery_log, Cadence.FULL_SWEEP),
    SweepRow(Watcher, lambda s: s.share_watch, Cadence.EVERY_RUN, lambda s: s.watch),
    SweepRow(JobListSweep, lambda s: s.share_job_list, Cadence.ADAPTIVE, lambda s: s.job_list),
)
SWEEPS = tuple(row.name for row in SWEEP_TABLE)


def _due(cadence: CadenceRow, now: float, *, full: bool) -> list[SweepRow]:
    """The table's sweeps due at ``now`` (all of them when ``full``), in order."""
    return [row for row in SWEEP_TABLE if full or cadence.due(row, now)]


def _names() -> list[str]:
    """The table's sweeps that recover jobs, by name, in order (read when asked: a test may
    run its own table)."""
    return [row.name for row in SWEEP_TABLE if row.sweep.recovers]


@dataclass
class ReconcileReport:
    """What one run found and did."""

    # Jobs recovered by sweep, every sweep of the table named (a sweep not run found none).
    recovered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_names(), 0))
    list_pages: int = 0
    watch_list_pages: int = 0  # of list_pages, the watch sweep's (unsettled jobs)
    watch_listings: int = 0  # listings of the unsettled jobs the watch sweep finished
    list_passes: int = 0  # job-list passes begun at the watermark (fresh ground)
    delivery_pages: int = 0
    row_pages: int = 0
    # The outbox sweep's: events sent, events the bus still refused, pages of its index.
    events_sent: int = 0
    events_left: int = 0
    outbox_pages: int = 0
    # The run sweep's: open runs checked, runs completed (manifest and event written).
    runs_checked: int = 0
    runs_completed: int = 0
    # Passes taken up where an earlier run saved them (job list, one per subscription's log).
    resumed_passes: int = 0
    jobs_seen: int = 0
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
    # Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has waited (``scrape_pipeline.
    # unsettled``), measured after the sweeps; None when the ledger could not be read.
    oldest_unsettled_seconds: float | None = None

    @property
    def total_recovered(self) -> int:
        """Jobs enqueued by this run, all sweeps together."""
        return sum(self.recovered.values())

    def add(self, sweep: str, result: SweepResult) -> None:
        """Count in what ``sweep`` did (its failure too: the work before it counts)."""
        if result.recovered or sweep in self.recovered:
            self.recovered[sweep] = self.recovered.get(sweep, 0) + result.recovered
        result.add_to(self)
        self.complete &= result.complete
        if result.error is not None:
            self.errors[sweep] = result.error

    def summary(self) -> dict[str, Any]:
        """The run in one record: the handler's log line and answer, the CLI's output."""
        return {
            "recovered": self.recovered,
            "total_recovered": self.total_recovered,
            "list_pages": self.list_pages,
            "watch_list_pages": self.watch_list_pages,
            "watch_listings": self.watch_listings,
            "listing_lag": self.listing_lag,
            "list_passes": self.list_passes,
            "delivery_pages": self.delivery_pages,
            "row_pages": self.row_pages,
            "events_sent": self.events_sent,
            "events_left": self.events_left,
            "outbox_pages": self.outbox_pages,
            "runs_checked": self.runs_checked,
            "runs_completed": self.runs_completed,
            "resumed_passes": self.resumed_passes,
            "jobs_seen": self.jobs_seen,
            "newly_watched": self.newly_watched,
            "skipped": self.skipped,
            "gap_open": self.gap_open,
            "watermark": self.watermark,
            "complete": self.complete,
            "errors": self.errors,
            "oldest_unsettled_seconds": self.oldest_unsettled_seconds,
        }


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
        emitter: Emitter | None = None,
        results: ResultStore | None = None,
    ) -> None:
        self.settings = settings
        self._parts = SweepParts(ledger=ledger, client=client, recoverer=recoverer, clock=clock)
        self._parts["emitter"], self._parts["results"] = emitter, results
        self._ledger, self._client, self._recoverer = ledger, client, recoverer
        self._books = Bookkeeping(ledger)
        self._clock = clock
        # The sweeps by name, built as the table says.
        self.sweeps: dict[str, Sweep[Any, Any]] = {
            row.name: row.sweep(row.settings(settings), **self._parts) for row in SWEEP_TABLE
        }

    def run(
        self, remaining: RemainingSeconds = unlimited, *, full: bool = False
    ) -> ReconcileReport:
        """The sweeps due (all of them with ``full``), in the table's order, each in its share
        of ``remaining()`` less the safety margin.

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
        started = self._clock.time()
        cadence = CadenceRow(
            self._books.read(CADENCE_CHECKPOINT) or {},
            self.settings.full_sweep_seconds,
            self.settings.gap_memory_seconds,
        )
        due = _due(cadence, started, full=full)
        report.skipped = [row.name for row in SWEEP_TABLE if row not in due]
        weights = [row.share(self.settings) for row in due]
        for index, row in enumerate(due):
            result = self.run_sweep(row.name, report, run_budget.share(weights[index:]))
            cadence.ran(row, result, started)
        report.gap_open = cadence.close(report.total_recovered, started, self._books)
        report.oldest_unsettled_seconds = self.oldest_unsettled()
        return report

    def oldest_unsettled(self) -> float | None:
        """The lag after the sweeps (what they re-sent counts as moved); None, and a log line,
        when the ledger cannot be read: the run's other results stand."""
        try:
            return oldest_unsettled_age(self._ledger, self._clock.time())
        except SWEEP_ERRORS as exc:
            logger.warning("reconciler could not measure the oldest unsettled row: %s", exc)
            return None

    def run_sweep(
        self, name: str, report: ReconcileReport, budget: Budget | None = None
    ) -> SweepResult:
        """Run the sweep called ``name`` (one of ``SWEEPS``) into ``report``, whatever its
        cadence; without a budget only its page cap bounds it."""
        result: SweepResult = self.sweeps[name].run(budget or Budget.no_deadline())
        report.add(name, result)
        if result.error is not None:
            logger.warning("reconciler sweep %s failed: %s", name, result.error)
        return result

    def replay_failed(
        self,
        webhook_id: str,
        *,
        since: float,
        report: ReconcileReport,
        only_status: int | None = None,
        source: str = SOURCE_DELIVERY_LOG,
    ) -> int:
        """Ensure the jobs of failed deliveries since ``since``; ``only_status`` narrows (401).
        A failing page is raised."""
        log = DeliveryLogSweep(self.settings, **self._parts)
        result = log.replay(webhook_id, since=since, only_status=only_status, source=source)
        result.add_to(report)
        report.complete &= result.complete
        return result.recovered
