"""The reconciler: ``SWEEP_TABLE``'s sweeps, in order, each in its share of the run's time and at
its cadence (remembered in one bookkeeping row), find what the webhooks missed and enqueue it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.deadline import RemainingSeconds, safety_margin
from scrape_pipeline.processor.results import ResultStore
from scrape_pipeline.reconciler.recovery import Recoverer
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps import (
    SWEEP_ERRORS,
    Budget,
    Sweep,
    SweepParts,
    SweepResult,
    unlimited,
)
from scrape_pipeline.reconciler.sweeps.delivery_log import DeliveryLogSweep
from scrape_pipeline.reconciler.sweeps.job_list import JobListSweep
from scrape_pipeline.reconciler.sweeps.ledger_scans import OutboxSweep, StuckRowsSweep
from scrape_pipeline.reconciler.sweeps.runs import RunsSweep
from scrape_pipeline.reconciler.sweeps.watch import Watcher

logger = logging.getLogger(__name__)


class Cadence(StrEnum):
    """How often a sweep runs."""

    EVERY_RUN = "every run"
    # Every RECONCILE_FULL_SWEEP seconds, and every run while its last one is unfinished: a lost
    # message waits STALE_AFTER anyway, a failed delivery is retried by the sender for minutes.
    FULL_SWEEP = "full sweep"
    # Every run while a run recovered a job within RECONCILE_GAP_MEMORY (a first run too: a new
    # deployment is watched closely), else as FULL_SWEEP.
    ADAPTIVE = "adaptive"


CADENCE_CHECKPOINT = "reconciler-cadence"
GAP_SEEN = "gap_seen_at"  # its field: when a run last recovered a job (the gap was open)
# Schedules fire a little early or late: a sweep due every 600 s is due at runs 599.5 s apart.
CADENCE_SLACK = 5.0


@dataclass(frozen=True)
class SweepRow:
    """One sweep of the run: its class, weight, cadence, and the part of the settings it takes."""

    sweep: type[Sweep[Any]]
    share: Callable[[ReconcilerSettings], float]
    cadence: Cadence
    settings: Callable[[ReconcilerSettings], object] = lambda s: s

    @property
    def name(self) -> str:
        """The sweep's name: its recovery source."""
        return self.sweep.name


# Most specific evidence first, so the gap is attributed to its cause: the outbox and the runs
# (cheap scans of a sparse index) first, the job list last, taking the time the others leave.
SWEEP_TABLE: tuple[SweepRow, ...] = (
    SweepRow(OutboxSweep, lambda s: s.share_outbox, Cadence.EVERY_RUN),
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


def _recovering() -> dict[str, int]:
    """The table's sweeps that recover jobs (read when asked: a test may run its own table)."""
    return {row.name: 0 for row in SWEEP_TABLE if row.sweep.recovers}


@dataclass
class CadenceRow:
    """The cadence's memory, as saved, and what this run adds to it (``finished``)."""

    saved: dict[str, str]
    full_sweep_seconds: float
    gap_memory_seconds: float
    finished: dict[str, str] = field(default_factory=dict)

    def due(self, row: SweepRow, now: float) -> bool:
        """``row`` is due at ``now``: by its cadence, the gap, and its last finished run's start."""
        if row.cadence is Cadence.ADAPTIVE and self.gap_open(now):
            return True
        last = self.saved.get(row.name)
        if row.cadence is Cadence.EVERY_RUN or not last:
            return True
        return now - float(last) >= self.full_sweep_seconds - CADENCE_SLACK

    def gap_open(self, now: float) -> bool:
        """A run recovered a job less than ``gap_memory_seconds`` ago: webhooks go missing."""
        seen = {**self.saved, **self.finished}.get(GAP_SEEN)
        return seen is not None and now - float(seen) < self.gap_memory_seconds

    def ran(self, row: SweepRow, result: SweepResult, started: float) -> None:
        """Remember a cadenced sweep's finished run (one cut short or failed is due again)."""
        if result.complete and row.cadence is not Cadence.EVERY_RUN:
            self.finished[row.name] = f"{started:.3f}"

    def close(self, recovered: int, started: float, books: Bookkeeping) -> bool:
        """Save what this run learned; whether the gap is open now."""
        if recovered or GAP_SEEN not in self.saved:
            # A first run knows nothing of the gap yet: it starts open.
            self.finished[GAP_SEEN] = f"{started:.3f}"
        if self.finished:
            books.write(CADENCE_CHECKPOINT, {**self.saved, **self.finished})
        return self.gap_open(started)


# The reconciler's lag: WATCHING is not lag (a job may run for days).
OWED_STATES = (JobState.RECEIVED, JobState.ENQUEUED, JobState.PROCESSING)


def oldest_unsettled_age(ledger: Ledger, now: float) -> float:
    """Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has been in its state (0: none)."""
    oldest = now
    for state in OWED_STATES:
        rows, _ = ledger.pending(state, since_before=now, limit=1)
        if rows:
            oldest = min(oldest, rows[0].state_since)
    return max(0.0, now - oldest)


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
        self.parts = SweepParts(ledger=ledger, client=client, recoverer=recoverer, clock=clock)
        self.parts["emitter"], self.parts["results"] = emitter, results
        self._ledger, self._client, self._recoverer, self._clock = ledger, client, recoverer, clock
        self.sweeps: dict[str, Sweep[Any]] = {
            row.name: row.sweep(row.settings(settings), **self.parts) for row in SWEEP_TABLE
        }

    def run(
        self, remaining: RemainingSeconds = unlimited, *, full: bool = False
    ) -> ReconcileReport:
        """The sweeps due (all with ``full``) in order, each in its share of ``remaining()``.
        Nothing is raised: a failed sweep resumes from its checkpoint next run (``errors``)."""
        report = ReconcileReport(recovered=_recovering())
        margin = safety_margin(remaining, self.settings.safety_margin_seconds)

        def usable() -> float:
            return remaining() - margin

        run_budget = Budget(usable, usable())
        started = self._clock.time()
        books = Bookkeeping(self._ledger)
        s = self.settings
        cadence = CadenceRow(
            books.read(CADENCE_CHECKPOINT) or {}, s.full_sweep_seconds, s.gap_memory_seconds
        )
        due = _due(cadence, started, full=full)
        report.skipped = [row.name for row in SWEEP_TABLE if row not in due]
        weights = [row.share(s) for row in due]
        for index, row in enumerate(due):
            result = self.run_sweep(row.name, report, run_budget.share(weights[index:]))
            cadence.ran(row, result, started)
        report.gap_open = cadence.close(report.total_recovered, started, books)
        report.oldest_unsettled_seconds = self.oldest_unsettled()
        return report

    def oldest_unsettled(self) -> float | None:
        """The lag after the sweeps; None, and a log line, when the ledger cannot be read."""
        try:
            return oldest_unsettled_age(self._ledger, self._clock.time())
        except SWEEP_ERRORS as exc:
            logger.warning("reconciler could not measure the oldest unsettled row: %s", exc)
            return None

    def run_sweep(
        self, name: str, report: ReconcileReport, budget: Budget | None = None
    ) -> SweepResult:
        """Run the sweep ``name`` into ``report``, whatever its cadence (no budget: page cap)."""
        sweep = self.sweeps[name]
        result = sweep.run(budget or Budget.no_deadline())
        # A failure is the report's (the handler logs it, the CLI prints it): not logged here.
        report.add(name, result, recovers=sweep.recovers)
        return result
