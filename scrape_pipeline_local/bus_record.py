"""What the stack's bus delivered, as a subscriber sees it: each event, and when it came.

A rule and a queue of our own on the bus (``events tail``'s, ``BusTail``) receive every
``scrape-pipeline`` event; ``drain`` reads the queue without waiting. An event's arrival is
its message's ``SentTimestamp``: EventBridge hands an event to its targets within PutEvents
(moto does too), and moto's SQS runs on the stack's clock, so it is when the bus took it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self

from scrape_pipeline.events.detail import DetailType
from scrape_pipeline_local.aws_calls import current
from scrape_pipeline_local.judge import MAX_EXAMPLES, Outcome, Unit
from scrape_pipeline_ops.events_tail import BusTail

PROCESSOR: Final = "processor"  # the principal the local stack's processor acts as
# The judge's outcomes that the pipeline tells on the bus (a resubmission is not told).
TOLD: Final = frozenset({Outcome.STORED, Outcome.DEAD_LETTERED, Outcome.CANCELLED})


@dataclass(frozen=True)
class Arrival:
    """One event as the subscriber received it."""

    event_id: str
    detail_type: str
    kind: str
    job_id: str
    arrived_at: float  # the stack's clock
    stored_at: float | None  # the detail's, for a stored job


def arrival_of(message: Mapping[str, Any]) -> Arrival:
    """The SQS message EventBridge sent (the envelope as its body) as an ``Arrival``."""
    envelope = json.loads(message["Body"])
    detail = envelope["detail"]
    stored = detail.get("stored_at")
    return Arrival(
        event_id=str(detail["event_id"]),
        detail_type=str(envelope["detail-type"]),
        kind=str(detail["kind"]),
        job_id=str(detail["job_id"]),
        arrived_at=int(message["Attributes"]["SentTimestamp"]) / 1000.0,
        stored_at=None if stored is None else float(stored),
    )


@dataclass(frozen=True)
class RunArrival:
    """One ``Run Completed`` as the subscriber received it (it names a run, not a job)."""

    run: str
    event_id: str
    arrived_at: float  # the stack's clock


class BusRecord:
    """Every event of ours the bus delivered while it was open, drained on demand."""

    def __init__(self, bus: str, *, events: Any, sqs: Any) -> None:
        self._tail = BusTail(bus, events=events, sqs=sqs, wait_seconds=0)
        self._sqs = sqs
        self.arrivals: list[Arrival] = []
        self.jobs: set[tuple[str, str]] = set()  # (kind, job id) with an event received
        self.runs: list[RunArrival] = []  # Run Completed: they name no job

    def open(self) -> None:
        """The rule and its queue: events put on the bus from now on are recorded."""
        self._tail.open()

    def close(self) -> None:
        """The rule and queue removed."""
        self._tail.close()

    def drain(self) -> int:
        """Read what the queue holds now; returns how many events came."""
        url = self._tail.queue_url
        assert url is not None, "open() first"
        came = 0
        while True:
            answer = self._sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
                AttributeNames=["SentTimestamp"],
            )
            messages = answer.get("Messages", [])
            if not messages:
                return came
            self._sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)
                ],
            )
            for message in messages:
                detail = json.loads(message["Body"])["detail"]
                if "job_id" not in detail:
                    sent = int(message["Attributes"]["SentTimestamp"]) / 1000.0
                    self.runs.append(RunArrival(str(detail["run"]), str(detail["event_id"]), sent))
                    continue
                arrival = arrival_of(message)
                self.arrivals.append(arrival)
                self.jobs.add((arrival.kind, arrival.job_id))
            came += len(messages)


@dataclass
class EventFigures:
    """The bus judged against the judge's outcomes, by job: what came, what did not."""

    received: dict[str, int] = field(default_factory=dict)  # per DetailType
    without_event: int = 0  # jobs with a told outcome and no event received
    without_examples: list[str] = field(default_factory=list)
    repeats: int = 0  # arrivals of an event_id already received
    # Per stored job: its DONE write to its event's first arrival (see ``figures``).
    latencies: list[float] = field(default_factory=list)
    latency_p50: float = 0.0
    latency_p99: float = 0.0
    latency_max: float = 0.0
    swept: int = 0  # events the outbox sweep put first: their emit was lost
    swept_latency_max: float = 0.0

    def lines(self) -> list[tuple[str, str]]:
        """The report's rows for the events."""
        received = ", ".join(f"{n} {kind}" for kind, n in sorted(self.received.items()))
        return [
            ("events received, by type", received or "0"),
            ("OUTCOMES WITHOUT AN EVENT", str(self.without_event)),
            ("events repeated (same event_id)", str(self.repeats)),
            (
                "stored-to-event latency p50 / p99",
                f"{self.latency_p50:.2f} s / {self.latency_p99:.2f} s",
            ),
            (
                "events the outbox sweep sent (emit lost)",
                f"{self.swept} (latest {self.swept_latency_max:.0f} s after its outcome)"
                if self.swept
                else "0",
            ),
        ]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def figures(
    outcomes: Mapping[Unit, Outcome],
    arrivals: Iterable[Arrival],
    wire: WireTimes,
    *,
    pending: Collection[tuple[str, str]] = (),
) -> EventFigures:
    """Each job with a told outcome (the judge's) against the events received for it; the
    ``pending`` jobs' outcome is still to come (a batch whose item's retry still runs).

    A stored job's latency is its event's arrival less its ``stored_at`` on the stack's clock
    (the outbox sweep's grace and schedule, a processor's waits), plus the wall time the
    processor took from the DONE write to the PutEvents (its batch's remaining work), which
    the stack's clock, standing still while a function runs, does not count.
    """
    found = EventFigures()
    first: dict[str, Arrival] = {}
    for arrival in arrivals:
        found.received[arrival.detail_type] = found.received.get(arrival.detail_type, 0) + 1
        if arrival.event_id in first:
            found.repeats += 1
            continue
        first[arrival.event_id] = arrival
    came = {(a.kind, a.job_id) for a in first.values()}
    owed = sorted(
        {(u.kind, u.job_id) for u, outcome in outcomes.items() if outcome in TOLD} - set(pending)
    )
    for kind, job_id in owed:
        if (kind, job_id) not in came:
            found.without_event += 1
            if len(found.without_examples) < MAX_EXAMPLES:
                found.without_examples.append(f"{kind} {job_id}")
    found.latencies = [
        max(0.0, a.arrived_at - a.stored_at) + wire.waited(a.event_id)
        for a in first.values()
        if a.detail_type == DetailType.STORED and a.stored_at is not None
    ]
    found.swept = len(wire.swept)
    # Of the swept, the stored ones: their stored_at is when the outcome was written.
    found.swept_latency_max = max(
        (
            a.arrived_at - a.stored_at
            for a in first.values()
            if a.event_id in wire.swept and a.stored_at is not None
        ),
        default=0.0,
    )
    found.latency_p50 = percentile(found.latencies, 50)
    found.latency_p99 = percentile(found.latencies, 99)
    found.latency_max = max(found.latencies, default=0.0)
    return found


_EVENT_ID = re.compile(r'"event_id":"([0-9a-f]{32})"')


def _strings(value: object) -> Iterator[str]:
    """Every string inside a request's parameters (an event's JSON is one, or within one)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _strings(inner)


class WireTimes:
    """Wall time, per event id, of the first DynamoDB request carrying the event (the write
    that put the outcome and its event on the row) and of the processor's first PutEvents of it.

    The manual clock stands still while a function runs, so the stack's clock cannot see how
    long an outcome waits for its batch's end; botocore's ``before-parameter-build`` hook, on
    every session made while entered (``CallRecorder``'s way), sees each request as sent.
    """

    def __init__(self) -> None:
        self.written: dict[str, float] = {}
        self.put: dict[str, float] = {}  # by the processor
        self.swept: set[str] = set()  # put by the reconciler (its outbox sweep) first
        self._lock = threading.Lock()
        self._spec = ("before-parameter-build", self._seen)
        self._recording = False

    def __enter__(self) -> Self:
        from botocore import handlers

        self._recording = True
        handlers.BUILTIN_HANDLERS.append(self._spec)
        return self

    def __exit__(self, *exc: object) -> None:
        from botocore import handlers

        self._recording = False  # sessions made meanwhile keep the handler: it goes quiet
        if self._spec in handlers.BUILTIN_HANDLERS:
            handlers.BUILTIN_HANDLERS.remove(self._spec)

    def _seen(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        if not self._recording:
            return
        service, now = str(model.service_model.service_name), time.perf_counter()
        if service != "dynamodb" and model.name != "PutEvents":
            return
        acting = current()
        by = acting.principal if acting is not None else ""
        with self._lock:
            for text in _strings(params):
                for event_id in _EVENT_ID.findall(text):
                    if service == "dynamodb":
                        self.written.setdefault(event_id, now)
                    elif event_id not in self.put and event_id not in self.swept:
                        if by == PROCESSOR:
                            self.put[event_id] = now
                        else:
                            self.swept.add(event_id)

    def waited(self, event_id: str) -> float:
        """Wall seconds from the event's DONE write to the processor's PutEvents of it (0 when
        another put it first: the stack's clock counts those waits)."""
        put, written = self.put.get(event_id), self.written.get(event_id)
        return 0.0 if put is None or written is None else max(0.0, put - written)
