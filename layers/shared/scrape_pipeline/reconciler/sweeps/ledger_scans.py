"""The sweeps of the ledger's own indexes, no cursor kept between runs: the outbox (events a crash
kept from the bus) and the stuck rows (a message lost, a lease whose holder died)."""

from __future__ import annotations

from functools import partial

from scrape_pipeline.jobs import JobState, Source
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps import Budget, Sweep, SweepResult, paged

SOURCE_STUCK_ROWS: str = Source.STUCK_ROWS
SWEEP_OUTBOX = "outbox"
OUTBOX_PAGE_ROWS = 100  # rows scanned per page of the index: ten PutEvents calls' worth


class OutboxSweep(Sweep[ReconcilerSettings]):
    """Emit the events a crash left in the outbox; nothing without a bus (it opens no gap)."""

    name = SWEEP_OUTBOX
    recovers = False

    def work(self, budget: Budget, result: SweepResult) -> None:
        if self._emitter is None:
            return
        before = self._clock.time() - self.settings.outbox_grace_seconds
        read = partial(self._ledger.pending_events, before=before, limit=OUTBOX_PAGE_ROWS)
        for pending in paged(budget.capped(self.settings.job_list.max_pages), read, result):
            result.outbox_pages += 1
            emitted = self._emitter.emit(pending)
            result.events_sent += emitted.sent
            result.events_left += emitted.left
            result.failed(next(iter(emitted.errors), None))


class StuckRowsSweep(Sweep[ReconcilerSettings]):
    """Re-enqueue RECEIVED/ENQUEUED rows unchanged for STALE_AFTER and PROCESSING rows whose lease
    expired."""

    name = SOURCE_STUCK_ROWS

    def work(self, budget: Budget, result: SweepResult) -> None:
        """Each state's rows oldest first. No cursor between runs: a row handled leaves the
        range (stamped now; PROCESSING rows stay, few), so a run starts where the last stopped."""
        now = self._clock.time()
        stale_before = now - self.settings.recovery.stale_after_seconds
        # A lease lasts far less than STALE_AFTER; rows leased before now may have expired.
        ranges = (
            (JobState.RECEIVED, stale_before),
            (JobState.ENQUEUED, stale_before),
            (JobState.PROCESSING, now),
        )
        pages = self.settings.job_list.max_pages
        for state, before in ranges:
            self._sweep_state(state, before, budget.capped(pages), result)
            if not result.complete:
                return  # out of time: the next run starts again from the oldest

    def _sweep_state(
        self, state: JobState, before: float, budget: Budget, result: SweepResult
    ) -> None:
        """One state's rows changed before ``before``, page by page; the recoverer's rule
        (``ledger.decide``) leaves a live lease alone."""
        limit = self.settings.rows_per_state
        read = partial(self._ledger.pending, state, since_before=before, limit=limit)
        for rows in paged(budget, read, result):
            result.row_pages += 1
            due = {row.key: row for row in rows}
            result.recovered += self._recoverer.ensure_many(
                list(due), due, source=SOURCE_STUCK_ROWS
            )
