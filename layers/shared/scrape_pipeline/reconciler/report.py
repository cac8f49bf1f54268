"""What one reconciler run found and did: each sweep adds its result, the reconciler composes it.

It imports no sweep, so the sweeps and the reconciler both import it with no circle."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol


class SweepCounts(Protocol):
    """A sweep's result as the report takes it in (``sweeps.SweepResult``)."""

    recovered: int
    complete: bool
    error: str | None

    def add_to(self, report: ReconcileReport) -> None: ...


@dataclass
class ReconcileReport:
    """What one run found and did."""

    # Jobs recovered by each sweep that recovers jobs (the run names them all, one not run too).
    recovered: dict[str, int] = field(default_factory=dict)
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
    skipped: list[str] = field(default_factory=list)  # sweeps not due this run (their cadence)
    gap_open: bool = False  # a run recovered a job within RECONCILE_GAP_MEMORY
    watermark: float = 0.0  # the job list's: the newest created_at listed, on the API's clock
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

    def add(self, sweep: str, result: SweepCounts, *, recovers: bool = True) -> None:
        """Count in what ``sweep`` did (its failure too: the work before it counts)."""
        if recovers:
            self.recovered[sweep] = self.recovered.get(sweep, 0) + result.recovered
        result.add_to(self)
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
