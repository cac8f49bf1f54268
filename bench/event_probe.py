"""Outcome events as a subscriber of the local stack's bus sees them, for the pipeline benchmark."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.aws_calls import count_by_function, take
from bench.report import percentile
from scrape_pipeline.events.detail import SOURCE

QUEUE = "bench-pipeline-subscriber"
STORED = "Job Stored"
PUT_EVENTS = "events:PutEvents"
# SentTimestamp is in milliseconds, stored_at rounded to them: closer is the same instant.
SAME_INSTANT_S = 0.002


@dataclass
class WallStamps:
    """Wall times of object writes (by key) and of the PutEvents accepting each event id."""

    stored: dict[str, float] = field(default_factory=dict)
    emitted: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, function: str, session: Any) -> None:
        """Stamp the processor's and reconciler's S3 writes and PutEvents (``session``'s)."""
        if function not in ("processor", "reconciler"):
            return
        events = session.events
        events.register("provide-client-params.s3.PutObject", self._remember_key)
        events.register("after-call.s3.PutObject", self._stored)
        events.register("provide-client-params.events.PutEvents", self._remember_ids)
        events.register("after-call.events.PutEvents", self._emitted)

    @staticmethod
    def _remember_key(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_key"] = params.get("Key")

    @staticmethod
    def _remember_ids(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_ids"] = [
            json.loads(entry.get("Detail", "{}")).get("event_id") for entry in params["Entries"]
        ]

    def _stored(self, context: dict[str, Any], **_: Any) -> None:
        key = context.get("bench_key")
        if key:
            with self.lock:
                self.stored[key] = time.perf_counter()

    def _emitted(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        now = time.perf_counter()
        answers = parsed.get("Entries", [])
        with self.lock:
            for event_id, answer in zip(context.get("bench_ids", []), answers, strict=False):
                if event_id and "EventId" in answer:  # taken by the bus, not refused
                    self.emitted.setdefault(event_id, now)


class EventProbe:
    """A subscriber queue on the stack's bus and the wall stamps of the functions' calls."""

    def __init__(self, stack: Any) -> None:
        """Call before the first invocation: the functions' clients are built counted here."""
        import boto3

        assert stack.resources is not None and stack.resources.event_bus, "no bus on the stack"
        self.stamps = WallStamps()
        self.calls = count_by_function(stack, self.stamps.watch)
        self._sqs = boto3.client("sqs")
        events = boto3.client("events")
        self._url = self._sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
        arn = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=["QueueArn"])
        bus = stack.resources.event_bus
        events.put_rule(Name=QUEUE, EventBusName=bus, EventPattern=json.dumps({"source": [SOURCE]}))
        events.put_targets(
            Rule=QUEUE,
            EventBusName=bus,
            Targets=[{"Id": "queue", "Arn": arn["Attributes"]["QueueArn"]}],
        )
        self.received: list[tuple[dict[str, Any], float]] = []  # (event, queued at)

    def drain(self) -> None:
        """Take every event the bus has delivered so far (call before the stack stops)."""
        while messages := take(self._sqs, self._url, AttributeNames=["SentTimestamp"]):
            for message in messages:
                queued = int(message["Attributes"]["SentTimestamp"]) / 1000
                self.received.append((json.loads(message["Body"]), queued))

    def figures(self, settled_jobs: int, stored_jobs: set[str]) -> dict[str, Any]:
        """Events by type, repeats, stored-to-event latencies and PutEvents calls;
        ``stored_jobs`` are the job ids with result objects in the bucket."""
        by_type = Counter(event["detail-type"] for event, _ in self.received)
        ids = Counter(event["detail"]["event_id"] for event, _ in self.received)
        simulated: list[float] = []
        wall_ms: list[float] = []
        combined: list[float] = []  # simulated, or the wall time where that is one instant
        first: dict[str, tuple[dict[str, Any], float]] = {}
        for event, queued in self.received:
            first.setdefault(event["detail"]["event_id"], (event, queued))
        settle_to_stored: list[float] = []  # the pipeline's own latency, on the stack's clock
        for event_id, (event, queued) in first.items():
            if event["detail-type"] != STORED:
                continue
            detail = event["detail"]
            if detail.get("settled_at") is not None:
                settle_to_stored.append(float(detail["stored_at"]) - float(detail["settled_at"]))
            lag = max(0.0, queued - float(detail["stored_at"]))
            simulated.append(lag)
            keys = detail.get("keys") or []
            written = [self.stamps.stored[k] for k in keys if k in self.stamps.stored]
            emitted = self.stamps.emitted.get(event_id)
            if lag >= SAME_INSTANT_S:  # a later instant: emitted by the outbox's sweep
                combined.append(lag)
            elif written and emitted is not None:  # one instant: the batch's own wall time
                wall_ms.append((emitted - max(written)) * 1000)
                combined.append(wall_ms[-1] / 1000)
        puts = {
            name: self.calls[name].counts.get(PUT_EVENTS, 0) for name in ("processor", "reconciler")
        }
        outcomes = len(ids)
        told = {e["detail"]["job_id"] for e, _ in first.values() if e["detail-type"] == STORED}
        return {
            "events_by_type": dict(sorted(by_type.items())),
            "outcomes_with_an_event": outcomes,
            "stored_without_an_event": len(stored_jobs - told),
            "repeats": sum(n - 1 for n in ids.values()),
            "stored_to_event_s": _summary(combined),
            "stored_to_event_simulated_s": _summary(simulated),
            "stored_to_event_wall_ms": _summary(wall_ms),
            "settle_to_stored_s": _summary(settle_to_stored),
            "put_events_calls": puts,
            "put_events_per_outcome": round(sum(puts.values()) / max(1, outcomes), 4),
            "put_events_per_settled_job": round(sum(puts.values()) / max(1, settled_jobs), 4),
        }


def _summary(values: list[float]) -> dict[str, float | int]:
    return {
        "count": len(values),
        "p50": round(percentile(values, 50), 3) if values else 0.0,
        "p99": round(percentile(values, 99), 3) if values else 0.0,
        "max": round(max(values), 3) if values else 0.0,
    }
