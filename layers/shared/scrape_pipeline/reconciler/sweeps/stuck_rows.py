"""The stuck-rows sweep: RECEIVED/ENQUEUED rows unchanged for STALE_AFTER (their message lost)
and PROCESSING rows with an expired lease (their holder died) are sent to the queue again."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from scrape_pipeline.jobs import JobState, Source
from scrape_pipeline.reconciler.budget import Budget
from scrape_pipeline.reconciler.sweeps import ReconcilerKnobs, Sweep, SweepResult, paged

if TYPE_CHECKING:
    from scrape_pipeline.reconciler.report import ReconcileReport

SOURCE_STUCK_ROWS: str = Source.STUCK_ROWS


@dataclass
class StuckRowsResult(SweepResult):
    """What one stuck-rows sweep did."""

    row_pages: int = 0

    def add_to(self, report: ReconcileReport) -> None:
        report.row_pages += self.row_pages


class StuckRowsSweep(Sweep[ReconcilerKnobs, StuckRowsResult]):
    """Re-enqueue rows whose message was lost and leases whose holder died."""

    name = SOURCE_STUCK_ROWS

    def new_result(self) -> StuckRowsResult:
        return StuckRowsResult()

    def work(self, budget: Budget, result: StuckRowsResult) -> None:
        """Each state's rows oldest first. No cursor between runs: a row handled leaves the
        range (stamped now; PROCESSING rows stay, few), so a run starts where the last stopped."""
        now = self._clock.time()
        stale_before = now - self.settings.stale_after_seconds
        # A lease lasts far less than STALE_AFTER; rows leased before now may have expired.
        ranges = (
            (JobState.RECEIVED, stale_before),
            (JobState.ENQUEUED, stale_before),
            (JobState.PROCESSING, now),
        )
        for state, before in ranges:
            read = partial(
                self._ledger.pending, state, since_before=before, limit=self.settings.rows_per_state
            )
            for rows in paged(budget.capped(self.settings.max_pages), read, result):
                result.row_pages += 1
                due = {
                    r.key: r
                    for r in rows
                    if state is not JobState.PROCESSING or r.lease_expired(now)
                }
                result.recovered += self._recoverer.ensure_many(
                    list(due), due, source=SOURCE_STUCK_ROWS
                )
            if not result.complete:
                return  # out of time: the next run starts again from the oldest
