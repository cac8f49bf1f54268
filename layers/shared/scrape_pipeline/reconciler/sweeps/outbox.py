"""The outbox sweep: outcome events a crash (or a refusal) kept from the bus, sent with their ids.

Events older than ``OUTBOX_GRACE_SECONDS`` (a live batch's are younger) leave the sparse index
once sent, so no cursor is kept between runs. Its counts are events: it opens no webhook gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from scrape_pipeline.reconciler.budget import Budget
from scrape_pipeline.reconciler.sweeps import ReconcilerKnobs, Sweep, SweepResult, paged

if TYPE_CHECKING:
    from scrape_pipeline.reconciler.report import ReconcileReport

SWEEP_OUTBOX = "outbox"
OUTBOX_PAGE_ROWS = 100  # rows scanned per page of the index: ten PutEvents calls' worth


@dataclass
class OutboxResult(SweepResult):
    """What one outbox sweep did: events sent, events the bus still refused, index pages."""

    events_sent: int = 0
    events_left: int = 0
    outbox_pages: int = 0

    def add_to(self, report: ReconcileReport) -> None:
        report.events_sent += self.events_sent
        report.events_left += self.events_left
        report.outbox_pages += self.outbox_pages


class OutboxSweep(Sweep[ReconcilerKnobs, OutboxResult]):
    """Emit the events a crash left in the outbox; nothing without a bus."""

    name = SWEEP_OUTBOX
    recovers = False

    def new_result(self) -> OutboxResult:
        return OutboxResult()

    def work(self, budget: Budget, result: OutboxResult) -> None:
        if self._emitter is None:
            return
        before = self._clock.time() - self.settings.outbox_grace_seconds
        read = partial(self._ledger.pending_events, before=before, limit=OUTBOX_PAGE_ROWS)
        for pending in paged(budget.capped(self.settings.max_pages), read, result):
            result.outbox_pages += 1
            emitted = self._emitter.emit(pending)
            result.events_sent += emitted.sent
            result.events_left += emitted.left
            result.failed(next(iter(emitted.errors), None))
