"""The reconciler's cadence: which sweeps are due this run, and its memory between runs.

``scrape_pipeline.reconciler``'s docstring explains the cadences; this module keeps when each
cadenced sweep last finished a run and when a run last recovered a job, in one bookkeeping row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scrape_pipeline.ledger import Bookkeeping
    from scrape_pipeline.sweeps import SweepResult

__all__ = ["CADENCE_CHECKPOINT", "CADENCE_SLACK", "GAP_SEEN", "Cadence", "CadenceRow", "Scheduled"]

# When each cadenced sweep last finished a run (bookkeeping row): the cadence's memory.
CADENCE_CHECKPOINT = "reconciler-cadence"
# Cadence row field: when a run last recovered a job (the measured gap was open).
GAP_SEEN = "gap_seen_at"
# Schedules fire a little early or late: a sweep due "every 600 s" at runs 599.5 s apart
# must not wait for the next run, a whole schedule period later.
CADENCE_SLACK = 5.0


class Cadence(StrEnum):
    """How often a sweep runs (module docstring)."""

    EVERY_RUN = "every run"
    # Once every RECONCILE_FULL_SWEEP seconds, and every run while its last one is unfinished.
    FULL_SWEEP = "full sweep"
    # Every run while the webhook gap is open (RECONCILE_GAP_MEMORY), else as FULL_SWEEP.
    ADAPTIVE = "adaptive"


class Scheduled(Protocol):
    """A sweep as the cadence sees it: its name and how often it runs."""

    @property
    def name(self) -> str: ...

    @property
    def cadence(self) -> Cadence: ...


@dataclass
class CadenceRow:
    """The cadence's memory: when each cadenced sweep last finished a run it began at, and
    when a run last recovered a job (``GAP_SEEN``)."""

    saved: dict[str, str]
    full_sweep_seconds: float
    gap_memory_seconds: float
    finished: dict[str, str] = field(default_factory=dict)

    def due(self, row: Scheduled, now: float) -> bool:
        """The watch sweep always; the job list always while the gap is open; the others (and
        the job list when webhooks have been complete for ``gap_memory_seconds``) once
        ``full_sweep_seconds`` after their last finished run began, so also at every run
        while their last one is unfinished."""
        if row.cadence is Cadence.ADAPTIVE and self.gap_open(now):
            return True
        last = self.saved.get(row.name)
        if row.cadence is Cadence.EVERY_RUN or not last:
            return True
        return now - float(last) >= self.full_sweep_seconds - CADENCE_SLACK

    def gap_open(self, now: float) -> bool:
        """A run recovered a job less than ``gap_memory_seconds`` ago: webhooks go missing."""
        seen = self.finished.get(GAP_SEEN) or self.saved.get(GAP_SEEN)
        if not seen:
            return False
        return now - float(seen) < self.gap_memory_seconds

    def ran(self, row: Scheduled, result: SweepResult, started: float) -> None:
        """Remember a cadenced sweep's finished run (one cut short or failed is due again)."""
        if result.complete and row.cadence is not Cadence.EVERY_RUN:
            self.finished[row.name] = f"{started:.3f}"

    def close(self, recovered: int, started: float, books: Bookkeeping) -> bool:
        """Save what this run learned; whether the gap is open now."""
        if recovered or GAP_SEEN not in self.saved:
            # A first run knows nothing of the gap yet: it starts open, so a new deployment
            # is watched closely until its webhooks have proved complete.
            self.finished[GAP_SEEN] = f"{started:.3f}"
        if self.finished:
            books.write(CADENCE_CHECKPOINT, {**self.saved, **self.finished})
        return self.gap_open(started)
