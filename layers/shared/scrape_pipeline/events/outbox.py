"""Outcome events on the bus at least once: the ``Emitter`` puts them (at most ten entries and
256 KB a call), then clears them from the rows still holding them once the bus took them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSUnavailableError
from scrape_pipeline.events.detail import SOURCE, OutcomeEvent
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.outbox import PendingEvent
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.work import WorkLedger

MAX_ENTRIES: Final = 10
MAX_REQUEST_BYTES: Final = 256 * 1024
_TIME_BYTES: Final = 14  # what EventBridge counts for an entry's time, sent or not


def _entry(bus_name: str, event: OutcomeEvent) -> dict[str, Any]:
    return {
        "EventBusName": bus_name,
        "Source": SOURCE,
        "DetailType": event.detail_type.value,
        "Detail": json.dumps(event.detail, sort_keys=True, separators=(",", ":")),
    }


def entry_size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge counts it against the 256 KB of a call."""
    text = entry["Source"] + entry["DetailType"] + entry["Detail"]
    return len(text.encode()) + _TIME_BYTES


def chunks(entries: Sequence[dict[str, Any]]) -> Iterator[list[int]]:
    """The entries' indexes, cut into calls of at most ten entries and 256 KB."""
    chunk: list[int] = []
    size = 0
    for index, entry in enumerate(entries):
        if chunk and (len(chunk) == MAX_ENTRIES or size + entry_size(entry) > MAX_REQUEST_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(index)
        size += entry_size(entry)
    if chunk:
        yield chunk


def retell_with_run(ledger: WorkLedger, row: LedgerRow) -> bool:
    """A settled row whose event does not name the run it names now (linked after the close):
    that event owed again naming it, the same id. True when it was retold."""
    if not row.is_done or row.run is None or row.outbox_event is None:
        return False
    event = OutcomeEvent.from_json(row.outbox_event)
    if event.detail.get("run") == row.run:
        return False
    told = OutcomeEvent(event.detail_type, {**event.detail, "run": row.run})
    return ledger.retell(row.key, row.outbox_event, told.to_json())


@dataclass
class EmitResult:
    """What one emit did: the events the bus took, how many it left in the outbox (their rows
    keep them), PutEvents calls, rows cleared, failed calls ("ErrorType: message")."""

    taken: list[OutcomeEvent] = field(default_factory=list)
    left: int = 0
    calls: int = 0
    cleared: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        """How many events the bus took."""
        return len(self.taken)


class Emitter:
    """Puts outbox events on the stack's bus (``bus_name``, through one EventBridge client) and
    clears them; holds a processor's until its batch's end, or with a ``linger`` until they
    fill a call or the oldest has waited that long."""

    def __init__(
        self, bus_name: str, ledger: WorkLedger, *, client: Any, linger: float = 0.0
    ) -> None:
        self.bus_name = bus_name
        self._events = client
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
        events = [OutcomeEvent.from_json(item.event) for item in pending]
        rows = {event.event_id: item for event, item in zip(events, pending, strict=True)}
        result = self.put(events)
        for event in result.taken:
            self._clear(rows[event.event_id], result)
        return result

    def put(self, events: Sequence[OutcomeEvent]) -> EmitResult:
        """Send ``events`` in as few calls as the limits allow; never raises for AWS."""
        result = EmitResult()
        entries = [_entry(self.bus_name, event) for event in events]
        for chunk in chunks(entries):
            result.calls += 1
            try:
                response = self._events.put_events(Entries=[entries[i] for i in chunk])
            except AWS_ERRORS as exc:
                # The bus or the network failed: these wait in the outbox for the next try.
                result.errors.append(f"{type(exc).__name__}: {exc}")
                response = {}
            # An event refused, or with no answer, is not known taken.
            answers = zip(chunk, response.get("Entries", []), strict=False)
            taken = [events[i] for i, answer in answers if not answer.get("ErrorCode")]
            result.taken += taken
            result.left += len(chunk) - len(taken)
        return result

    def _clear(self, item: PendingEvent, result: EmitResult) -> None:
        """Clear an event the bus took; one not cleared is sent again by the sweep (same id)."""
        try:
            result.cleared += self._ledger.clear_outbox(item.key, item.event)
        except AWSUnavailableError as exc:
            result.errors.append(str(exc))
