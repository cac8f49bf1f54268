"""The emitter: outbox events put on the bus, then cleared from the rows still holding them; the
processor ``add``s and ``flush``es its outcomes, the outbox sweep ``emit``s what is left."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.events.bus import MAX_ENTRIES, EventBus
from scrape_pipeline.events.detail import OutcomeEvent, with_run
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.outbox import PendingEvent
from scrape_pipeline.ledger.rows import LedgerRow


def retell_with_run(ledger: Ledger, row: LedgerRow) -> bool:
    """A settled row whose event does not name the run it names now (linked after the close):
    that event owed again naming it, the same id. True when it was retold."""
    if not row.is_done or row.run is None or row.outbox_event is None:
        return False
    return _retold(ledger, row.key, row.outbox_event, with_run(row.outbox_event, row.run))


def _retold(ledger: Ledger, key: JobKey, event: str, told: str | None) -> bool:
    return told is not None and ledger.retell(key, event, told)


@dataclass
class EmitResult:
    """What one emit did: events the bus took, those left in the outbox, PutEvents calls."""

    sent: int = 0
    left: int = 0
    calls: int = 0
    cleared: int = 0
    errors: list[str] = field(default_factory=list)


class Emitter:
    """Sends outbox events and clears them; holds a processor's until its batch's end, or with
    a ``linger`` until they fill a call or the oldest has waited that long."""

    def __init__(self, bus: EventBus, ledger: Ledger, *, linger: float = 0.0) -> None:
        self.bus = bus
        self._ledger = ledger
        self._linger = linger
        self._held: list[PendingEvent] = []

    @property
    def held(self) -> int:
        """Events added and not flushed yet."""
        return len(self._held)

    def add(self, key: JobKey, event: str, at: float) -> None:
        """An outcome just written with ``event`` in its row's outbox: sent at ``flush``."""
        self._held.append(PendingEvent(key, at, event))

    def flush(self, now: float) -> EmitResult:
        """Send the events held: all, or with a linger the full calls' worth and the rest only
        once its oldest has waited the linger (the rows keep any not taken)."""
        send, keep = self._held, []
        if self._linger > 0:
            full = len(send) - len(send) % MAX_ENTRIES
            rest = send[full:]  # the youngest: events are added in the order they are written
            if rest and now - rest[0].outbox_at < self._linger:
                send, keep = send[:full], rest
        self._held = keep
        return self.emit(send)

    def emit(self, pending: Sequence[PendingEvent]) -> EmitResult:
        """Put ``pending`` on the bus, ten a call, then clear each one it took."""
        result = EmitResult()
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
            self._clear(rows[event.event_id], result)
        return result

    def _clear(self, item: PendingEvent, result: EmitResult) -> None:
        """Clear an event the bus took; one not cleared is sent again by the sweep (same id)."""
        try:
            result.cleared += self._ledger.clear_outbox(item.key, item.event)
        except AWSUnavailableError as exc:
            result.errors.append(str(exc))
