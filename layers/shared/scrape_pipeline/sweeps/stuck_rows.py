"""The stuck-rows sweep: rows whose message was lost and leases whose holder died.

RECEIVED/ENQUEUED rows unchanged for STALE_AFTER and PROCESSING rows with an expired lease,
read from the sparse ``pending-by-state`` index, are sent to the queue again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from scrape_pipeline.budget import Budget
from scrape_pipeline.jobs import JobState, Source
from scrape_pipeline.sweeps import Sweep, SweepResult

if TYPE_CHECKING:
    from scrape_pipeline.reconciler import ReconcileReport

SOURCE_STUCK_ROWS: str = Source.STUCK_ROWS


class StuckRowsSettings(Protocol):
    """What the sweep reads of ``ReconcilerSettings`` (documented there)."""

    @property
    def stale_after_seconds(self) -> float: ...
    @property
    def rows_per_state(self) -> int: ...
    @property
    def max_pages(self) -> int: ...


@dataclass
class StuckRowsResult(SweepResult):
    """What one stuck-rows sweep did."""

    row_pages: int = 0

    def add_to(self, report: ReconcileReport) -> None:
        report.row_pages += self.row_pages


class StuckRowsSweep(Sweep[StuckRowsSettings, StuckRowsResult]):
    """Re-enqueue rows whose message was lost and leases whose holder died."""

    name = SOURCE_STUCK_ROWS

    def new_result(self) -> StuckRowsResult:
        return StuckRowsResult()

    def work(self, budget: Budget, result: StuckRowsResult) -> None:
        """Each state's rows oldest first (the index is ordered by ``state_since``), page after
        page while the budget and the page cap (per state) last.

        No cursor is kept between runs: a fresh query from the oldest is the resume point,
        because every RECEIVED or ENQUEUED row handled leaves the range (``mark_enqueued``
        stamps it now, newer than ``stale_after`` ago), so the next run's first page starts
        where this run stopped. PROCESSING rows do not move when their message is re-sent,
        but there are only as many as leases taken recently, far fewer than a page cap of pages.
        """
        now = self._clock.time()
        stale_before = now - self.settings.stale_after_seconds
        # A lease lasts far less than STALE_AFTER; rows leased before now may have expired.
        ranges = (
            (JobState.RECEIVED, stale_before),
            (JobState.ENQUEUED, stale_before),
            (JobState.PROCESSING, now),
        )
        for state, before in ranges:
            if not self._sweep_state(state, before, result, now=now, budget=budget):
                result.complete = False
                return  # out of time: the next run starts again from the oldest

    def _sweep_state(
        self, state: JobState, before: float, result: StuckRowsResult, *, now: float, budget: Budget
    ) -> bool:
        """Handle ``state``'s rows older than ``before``; False when cut short."""
        pages = budget.capped(self.settings.max_pages)
        cursor: dict[str, object] | None = None
        read = 0
        while not pages.spent(read):
            rows, cursor = self._ledger.pending(
                state, since_before=before, limit=self.settings.rows_per_state, cursor=cursor
            )
            read += 1
            result.row_pages += 1
            due = {
                row.key: row
                for row in rows
                if state is not JobState.PROCESSING or row.lease_expired(now)
            }
            result.recovered += self._recoverer.ensure_many(
                list(due), due, source=SOURCE_STUCK_ROWS
            )
            if cursor is None:
                return True
        return False
