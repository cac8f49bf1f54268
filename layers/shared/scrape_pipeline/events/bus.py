"""PutEvents on the stack's bus: at most ten entries and 256 KB a call; an entry refused, or a
call that failed, leaves its events to be sent again."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scrape_pipeline.aws_errors import AWS_ERRORS
from scrape_pipeline.events.detail import SOURCE, OutcomeEvent

MAX_ENTRIES: Final = 10
MAX_REQUEST_BYTES: Final = 256 * 1024
_TIME_BYTES: Final = 14  # what EventBridge counts for an entry's time, sent or not


@dataclass
class PutResult:
    """What one ``EventBus.put`` did: the events the bus took, those it did not, its calls."""

    sent: list[OutcomeEvent] = field(default_factory=list)
    failed: list[OutcomeEvent] = field(default_factory=list)
    calls: int = 0
    error: str | None = None  # a call that failed altogether ("ErrorType: message")


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


def chunks(
    entries: Sequence[dict[str, Any]], *, limit: int = MAX_REQUEST_BYTES
) -> Iterator[list[int]]:
    """The entries' indexes, cut into calls of at most ten entries and ``limit`` bytes."""
    chunk: list[int] = []
    size = 0
    for index, entry in enumerate(entries):
        grown = size + entry_size(entry)
        if chunk and (len(chunk) == MAX_ENTRIES or grown > limit):
            yield chunk
            chunk, grown = [], entry_size(entry)
        chunk.append(index)
        size = grown
    if chunk:
        yield chunk


class EventBus:
    """The stack's bus, through one EventBridge client."""

    def __init__(self, name: str, *, client: Any) -> None:
        self.name = name
        self._events = client

    def put(self, events: Sequence[OutcomeEvent]) -> PutResult:
        """Send ``events`` in as few calls as the limits allow; never raises for AWS."""
        result = PutResult()
        entries = [_entry(self.name, event) for event in events]
        for chunk in chunks(entries):
            batch = [events[i] for i in chunk]
            result.calls += 1
            try:
                response = self._events.put_events(Entries=[entries[i] for i in chunk])
            except AWS_ERRORS as exc:
                # The bus or the network failed: these wait in the outbox for the next try.
                result.failed += batch
                result.error = f"{type(exc).__name__}: {exc}"
                continue
            # An event refused, or with no answer, is not known taken.
            answers = response.get("Entries", [])
            for event, answer in zip(batch, answers, strict=False):
                (result.failed if answer.get("ErrorCode") else result.sent).append(event)
            result.failed += batch[len(answers) :]
        return result
