"""The outbox sweep: outcomes whose event a crash (or a refusal) kept from the bus.

The processor emits its batch's events at the batch's end; one killed between an outcome and
that emit leaves the event on the row, in the sparse ``outbox-by-time`` index. Every run, this
scans the index for events written more than ``OUTBOX_GRACE_SECONDS`` ago (a live batch's are
younger: the processor is still going to emit them) and emits them, ten a PutEvents call, with
the ids they were written with. So a lost emit is repeated within one reconciler interval
after the grace.

No cursor is kept between runs: every event sent leaves the index, so the next run's scan
starts where this one's left off, as the stuck-rows sweep's query does. It recovers no job
(``recovers`` False): its counts are events, and they must not open the webhook gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Unpack

from scrape_pipeline.budget import Budget
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.sweeps import Sweep, SweepParts, SweepResult

if TYPE_CHECKING:
    from scrape_pipeline.reconciler import ReconcileReport

SWEEP_OUTBOX = "outbox"
# Rows scanned per page of the index: ten PutEvents calls' worth.
OUTBOX_PAGE_ROWS = 100


class OutboxSettings(Protocol):
    """What the sweep reads of ``ReconcilerSettings`` (documented there)."""

    @property
    def outbox_grace_seconds(self) -> float: ...
    @property
    def max_pages(self) -> int: ...


@dataclass
class OutboxResult(SweepResult):
    """What one outbox sweep did: events sent, events the bus still refused, index pages."""

    events_sent: int = 0
    events_left: int = 0
    outbox_pages: int = 0
    put_calls: int = 0

    def add_to(self, report: ReconcileReport) -> None:
        report.events_sent += self.events_sent
        report.events_left += self.events_left
        report.outbox_pages += self.outbox_pages


class OutboxSweep(Sweep[OutboxSettings, OutboxResult]):
    """Emit the events a crash left in the outbox; nothing without a bus."""

    name = SWEEP_OUTBOX
    recovers = False

    def __init__(self, settings: OutboxSettings, **parts: Unpack[SweepParts]) -> None:
        super().__init__(settings, **parts)
        self._emitter: Emitter | None = parts.get("emitter")

    def new_result(self) -> OutboxResult:
        return OutboxResult()

    def work(self, budget: Budget, result: OutboxResult) -> None:
        """The index page by page while the budget and the page cap last."""
        if self._emitter is None:
            return
        before = self._clock.time() - self.settings.outbox_grace_seconds
        pages = budget.capped(self.settings.max_pages)
        cursor: dict[str, object] | None = None
        read = 0
        while not pages.spent(read):
            pending, cursor = self._ledger.pending_events(
                before=before, limit=OUTBOX_PAGE_ROWS, cursor=cursor
            )
            read += 1
            result.outbox_pages += 1
            emitted = self._emitter.emit(pending)
            result.events_sent += emitted.sent
            result.events_left += emitted.left
            result.put_calls += emitted.calls
            if emitted.errors and result.error is None:
                result.error = emitted.errors[0]
            if cursor is None:
                return
        result.complete = False
