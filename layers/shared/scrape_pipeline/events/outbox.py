"""The emitter: outbox events put on the bus, then cleared from their rows.

The processor hands it each outcome it wrote (``add``) and sends them at its batch's end
(``flush``); the outbox sweep hands it the rows a crash left behind (``emit``). Either way an
event the bus refused, or one whose call failed, stays on its row for the next sweep, and an
event is cleared only if the row still holds it (``Ledger.clear_outbox``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.events.bus import EventBus
from scrape_pipeline.events.detail import OutcomeEvent, with_run
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger import Ledger, LedgerRow, PendingEvent


def told_with_run(ledger: Ledger, row: LedgerRow, event: str) -> str:
    """The event to emit for ``row``, settled with ``event``: as written, or retold naming the
    run a journal linked to the row while it was processed (the same id, owed again)."""
    if row.run is None:
        return event
    told = with_run(event, row.run)
    if told is None or not ledger.retell(row.key, event, told):
        return event  # named it already, or the row moved on (the outbox has its event)
    return told


@dataclass
class EmitResult:
    """What one emit did: events the bus took, those left in the outbox, PutEvents calls."""

    sent: int = 0
    left: int = 0
    calls: int = 0
    cleared: int = 0
    errors: list[str] = field(default_factory=list)


class Emitter:
    """Sends outbox events and clears them; holds one processor batch's events meanwhile."""

    def __init__(self, bus: EventBus, ledger: Ledger) -> None:
        self.bus = bus
        self._ledger = ledger
        self._held: list[PendingEvent] = []

    def add(self, key: JobKey, event: str, at: float) -> None:
        """An outcome just written with ``event`` in its row's outbox: sent at ``flush``."""
        self._held.append(PendingEvent(key, at, event))

    def flush(self) -> EmitResult:
        """Send the events held since the last flush (the rows keep any not taken)."""
        held, self._held = self._held, []
        return self.emit(held)

    def emit(self, pending: Sequence[PendingEvent]) -> EmitResult:
        """Put ``pending`` on the bus, ten a call, then clear each one it took."""
        result = EmitResult()
        if not pending:
            return result
        events: list[OutcomeEvent] = []
        rows: dict[str, PendingEvent] = {}
        for item in pending:
            event = OutcomeEvent.from_json(item.event)
            events.append(event)
            rows[event.event_id] = item
        put = self.bus.put(events)
        result.calls, result.sent, result.left = put.calls, len(put.sent), len(put.failed)
        if put.error:
            result.errors.append(put.error)
        for event in put.sent:
            item = rows[event.event_id]
            try:
                result.cleared += self._ledger.clear_outbox(item.key, item.event)
            except AWSUnavailableError as exc:
                # Sent but not cleared: the sweep sends it again, with the same id.
                result.errors.append(str(exc))
        return result
