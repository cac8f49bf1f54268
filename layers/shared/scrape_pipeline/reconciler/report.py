"""What one reconciler run found and did (each sweep counts into a ``SweepResult``, the run adds
them up), and the metrics it emits. It imports no sweep: the sweeps import it with no circle."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

if TYPE_CHECKING:
    from aws_lambda_powertools import Metrics


@dataclass
class Counts:
    """What the sweeps count: each sweep's result has some of these fields, the run adds them up."""

    list_pages: int = 0
    watch_list_pages: int = 0  # of list_pages, the watch sweep's (unsettled jobs)
    watch_listings: int = 0  # listings of the unsettled jobs the watch sweep finished
    listing_lag: float = 0.0  # the job list's measured listing lag, seconds
    list_passes: int = 0  # job-list passes begun at the watermark (fresh ground)
    delivery_pages: int = 0
    row_pages: int = 0
    events_sent: int = 0  # by the outbox and run sweeps
    events_left: int = 0  # the bus still refused them
    outbox_pages: int = 0
    runs_checked: int = 0
    runs_completed: int = 0  # manifest and event written
    resumed_passes: int = 0  # taken up where an earlier run saved them
    jobs_seen: int = 0
    newly_watched: int = 0  # unsettled jobs the job list recorded WATCHING
    watermark: float = 0.0  # the job list's: the newest created_at listed, on the API's clock


@dataclass
class SweepResult(Counts):
    """What one sweep's run did: the counts it keeps (the others stay 0), then its fate."""

    recovered: int = 0  # jobs enqueued (or woken)
    complete: bool = True  # False: cut short (time, pages) or failed; the next run goes on
    error: str | None = None  # what failed ("ErrorType: message"), after the work before it

    def failed(self, error: str | None) -> None:
        """Note ``error`` (None: none) unless an earlier one is noted: the first cause is kept."""
        self.error = self.error or error


def _merged(mine: float, theirs: float) -> float:
    """A count added in; a level (a float) kept at the highest."""
    return max(mine, theirs) if isinstance(mine, float) else mine + theirs


@dataclass
class ReconcileReport(Counts):
    """What one run found and did."""

    # Jobs recovered by each sweep that recovers jobs (the run names them all, one not run too).
    recovered: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # sweeps not due this run (their cadence)
    gap_open: bool = False  # a run recovered a job within RECONCILE_GAP_MEMORY
    # False when a budget ran out or a sweep failed: the next run carries on from the checkpoints.
    complete: bool = True
    errors: dict[str, str] = field(default_factory=dict)  # sweep -> what failed
    # Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has waited, after the sweeps; None
    # when the ledger could not be read.
    oldest_unsettled_seconds: float | None = None

    @property
    def total_recovered(self) -> int:
        """Jobs enqueued by this run, all sweeps together."""
        return sum(self.recovered.values())

    def add(self, sweep: str, result: SweepResult, *, recovers: bool = True) -> None:
        """Count in what ``sweep`` did (its failure too: the work before it counts)."""
        if recovers:
            self.recovered[sweep] = self.recovered.get(sweep, 0) + result.recovered
        for count in dataclasses.fields(Counts):
            mine, theirs = getattr(self, count.name), getattr(result, count.name)
            setattr(self, count.name, _merged(mine, theirs))
        self.complete &= result.complete
        if result.error is not None:
            self.errors[sweep] = result.error

    def summary(self) -> dict[str, Any]:
        """The run in one record: the handler's log line and answer, the CLI's output."""
        record = dataclasses.asdict(self)
        return {
            "recovered": record.pop("recovered"),
            "total_recovered": self.total_recovered,
            **record,
        }


class ReconcilerMetric(StrEnum):
    """One series of the reconciler's (namespace ScrapePipeline, dimension ``service``: the
    template's alarms name these); each run emits every one (a zero too) but a lag unmeasured."""

    # The run's total (service only: ReconcilerRecoveriesAlarm), and one per source.
    JOBS_RECOVERED = "JobsRecovered"
    LIST_PAGES = "ReconcilerListPages"
    # Sweeps that failed this run (service only: ReconcileSweepFailedAlarm), and one per sweep.
    SWEEP_FAILED = "ReconcileSweepFailed"
    # 1 per run that returned: its absence is ReconcilerHeartbeatAlarm.
    RUN_COMPLETED = "ReconcilerRunCompleted"
    # Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has waited: OldestUnsettledAlarm.
    OLDEST_UNSETTLED = "OldestUnsettledSeconds"


def emit_run(metrics: Metrics, report: ReconcileReport, service: str) -> None:
    """Every series of one run: its totals by service (the alarms'), then one per source and per
    failed sweep (the dashboard's)."""
    count = MetricUnit.Count
    metrics.add_metric(
        name=ReconcilerMetric.JOBS_RECOVERED, unit=count, value=report.total_recovered
    )
    metrics.add_metric(name=ReconcilerMetric.LIST_PAGES, unit=count, value=report.list_pages)
    metrics.add_metric(name=ReconcilerMetric.SWEEP_FAILED, unit=count, value=len(report.errors))
    metrics.add_metric(name=ReconcilerMetric.RUN_COMPLETED, unit=count, value=1)
    if report.oldest_unsettled_seconds is not None:
        metrics.add_metric(
            name=ReconcilerMetric.OLDEST_UNSETTLED,
            unit=MetricUnit.Seconds,
            value=report.oldest_unsettled_seconds,
        )
    dimensions = {"service": service}
    for source, recovered in report.recovered.items():
        with single_metric(
            name=ReconcilerMetric.JOBS_RECOVERED,
            unit=count,
            value=recovered,
            default_dimensions=dimensions,
        ) as metric:
            metric.add_dimension(name="source", value=source)
    for sweep in report.errors:
        with single_metric(
            name=ReconcilerMetric.SWEEP_FAILED, unit=count, value=1, default_dimensions=dimensions
        ) as metric:
            metric.add_dimension(name="sweep", value=sweep)
