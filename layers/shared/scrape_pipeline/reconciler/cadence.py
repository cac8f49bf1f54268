"""The reconciler's cadence: which sweeps are due this run, remembered in one bookkeeping row
(when each cadenced sweep last finished a run, and when a run last recovered a job)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scrape_pipeline.ledger.bookkeeping import Bookkeeping
    from scrape_pipeline.reconciler.sweeps import SweepResult

CADENCE_CHECKPOINT = "reconciler-cadence"
GAP_SEEN = "gap_seen_at"  # its field: when a run last recovered a job (the gap was open)
# Schedules fire a little early or late: a sweep due every 600 s is due at runs 599.5 s apart.
CADENCE_SLACK = 5.0


class Cadence(StrEnum):
    """How often a sweep runs."""

    EVERY_RUN = "every run"
    # Every RECONCILE_FULL_SWEEP seconds, and every run while its last one is unfinished: a lost
    # message waits STALE_AFTER anyway, a failed delivery is retried by the sender for minutes.
    FULL_SWEEP = "full sweep"
    # Every run while a run recovered a job within RECONCILE_GAP_MEMORY (a first run too: a new
    # deployment is watched closely), else as FULL_SWEEP.
    ADAPTIVE = "adaptive"


class Scheduled(Protocol):
    """A sweep as the cadence sees it: its name and how often it runs."""

    @property
    def name(self) -> str: ...

    @property
    def cadence(self) -> Cadence: ...


@dataclass
class CadenceRow:
    """The cadence's memory, as saved, and what this run adds to it (``finished``)."""

    saved: dict[str, str]
    full_sweep_seconds: float
    gap_memory_seconds: float
    finished: dict[str, str] = field(default_factory=dict)

    def due(self, row: Scheduled, now: float) -> bool:
        """``row`` is due at ``now``: by its cadence, the gap, and when its last finished run
        began."""
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
            # A first run knows nothing of the gap yet: it starts open.
            self.finished[GAP_SEEN] = f"{started:.3f}"
        if self.finished:
            books.write(CADENCE_CHECKPOINT, {**self.saved, **self.finished})
        return self.gap_open(started)
