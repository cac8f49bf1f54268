"""Local ``sqs_poller`` against real SQS queues in moto (server mode, on a manual clock).

The queues are the template's (visibility 360 s, redrive after 5 receives). Batching windows
and visibility run on the manual clock; only the function timeout is wall time, kept tiny.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.create import create_queues
from scrape_pipeline_local.limits import LAMBDA_SYNC_MAX_PAYLOAD_BYTES, event_bytes
from scrape_pipeline_local.moto_server import MotoServer
from scrape_pipeline_local.sqs_poller import SqsEventSource

VISIBILITY_TIMEOUT = 360  # JobQueue's, from template.yaml
WINDOW = 5.0
TINY_TIMEOUT = 0.3
POLL = 0.005


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sqs(clock: ManualClock) -> Iterator[Any]:
    server = MotoServer(clock=clock).start()
    server.reset()
    try:
        yield boto3.client("sqs", endpoint_url=server.endpoint)
    finally:
        server.stop()


@pytest.fixture
def queue_url(sqs: Any) -> str:
    return create_queues(sqs, "jobs")[0]


class Recorder:
    """A handler that keeps the events it got and succeeds."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.events.append(event)
        return {"batchItemFailures": []}

    @property
    def sizes(self) -> list[int]:
        return [len(event["Records"]) for event in self.events]


def send(sqs: Any, queue_url: str, count: int, body: str = "job") -> None:
    for i in range(count):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"{body}-{i}")


def visible(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def windowed(sqs: Any, queue_url: str, clock: ManualClock) -> tuple[SqsEventSource, Recorder]:
    """A poller of batches of 10 with a 5 s window, and its handler."""
    handler = Recorder()
    poller = SqsEventSource(
        sqs, queue_url, handler, batch_size=10, batching_window_seconds=WINDOW, clock=clock
    )
    return poller, handler


def test_a_partial_batch_waits_for_the_window_then_is_invoked(sqs, queue_url, clock):
    poller, handler = windowed(sqs, queue_url, clock)
    send(sqs, queue_url, 3)

    assert poller.drain() == 0
    assert poller.held == 3 and visible(sqs, queue_url) == 0  # received: invisible meanwhile
    clock.advance(WINDOW - 0.1)
    assert poller.drain() == 0 and handler.events == []
    clock.advance(0.1)
    assert poller.drain() == 3

    assert handler.sizes == [3] and poller.held == 0
    clock.advance(VISIBILITY_TIMEOUT + 1)
    assert visible(sqs, queue_url) == 0  # deleted, not merely hidden


def test_a_batch_held_past_its_window_and_visibility_is_invoked_once(sqs, queue_url, clock):
    # GIVEN a partial batch held in its window
    poller, handler = windowed(sqs, queue_url, clock)
    send(sqs, queue_url, 3)
    assert poller.drain() == 0 and poller.held == 3
    # WHEN the next poll comes after both the window and the messages' visibility ran out (a
    # stack stepped by more than the visibility timeout), as Lambda had long invoked it
    clock.advance(VISIBILITY_TIMEOUT + WINDOW + 1)
    assert poller.drain() == 3
    # THEN the batch holds each message once, and none is left on the queue
    bodies = [record["body"] for event in handler.events for record in event["Records"]]
    assert sorted(bodies) == ["job-0", "job-1", "job-2"]
    clock.advance(VISIBILITY_TIMEOUT + 1)
    assert visible(sqs, queue_url) == 0


def test_a_full_batch_is_invoked_at_once(sqs, queue_url, clock):
    poller, handler = windowed(sqs, queue_url, clock)
    send(sqs, queue_url, 13)

    assert poller.drain() == 10
    assert handler.sizes == [10] and poller.held == 3
    assert poller.flush_at == clock.time() + WINDOW


def test_without_a_window_each_poll_invokes_what_it_received(sqs, queue_url, clock):
    handler = Recorder()
    poller = SqsEventSource(sqs, queue_url, handler, batch_size=10, clock=clock)
    send(sqs, queue_url, 3)

    assert poller.drain() == 3
    assert handler.sizes == [3]


def test_a_handler_past_its_timeout_is_stopped_and_its_batch_comes_back(sqs, queue_url, clock):
    release = threading.Event()
    effects: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        effects.append("started")
        while not release.wait(POLL):
            pass
        effects.append("past the deadline")
        return {"batchItemFailures": []}

    poller = SqsEventSource(
        sqs, queue_url, handler, batch_size=10, timeout_seconds=TINY_TIMEOUT, clock=clock
    )
    send(sqs, queue_url, 2)

    assert poller.drain() == 2
    release.set()

    assert poller.timeouts == 1 and poller.handler_errors == 0
    assert effects == ["started"]
    assert visible(sqs, queue_url) == 0  # still within the visibility timeout
    clock.advance(VISIBILITY_TIMEOUT + 1)
    back = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )["Messages"]
    assert sorted(m["Body"] for m in back) == ["job-0", "job-1"]
    # moto counts the timed-out delivery: redrive sees it.
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in back} == {"2"}


def test_a_handler_that_raises_leaves_its_batch_on_the_queue(sqs, queue_url, clock):
    def handler(event: dict[str, Any], context: Any) -> None:
        raise RuntimeError("boom")

    poller = SqsEventSource(sqs, queue_url, handler, clock=clock)
    send(sqs, queue_url, 2)

    assert poller.drain() == 2
    assert poller.handler_errors == 1 and poller.timeouts == 0
    clock.advance(VISIBILITY_TIMEOUT + 1)
    assert visible(sqs, queue_url) == 2


def test_reported_failures_stay_and_the_rest_are_deleted(sqs, queue_url, clock):
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        first = event["Records"][0]["messageId"]
        return {"batchItemFailures": [{"itemIdentifier": first}]}

    poller = SqsEventSource(sqs, queue_url, handler, clock=clock)
    send(sqs, queue_url, 3)

    assert poller.drain() == 3
    clock.advance(VISIBILITY_TIMEOUT + 1)
    assert visible(sqs, queue_url) == 1


def test_a_batch_never_exceeds_the_lambda_invoke_payload(sqs, queue_url, clock):
    # SQS takes messages up to 1 MiB: ten of 900 KB do not fit one 6 MB invocation.
    handler = Recorder()
    poller = SqsEventSource(sqs, queue_url, handler, batch_size=10, clock=clock)
    send(sqs, queue_url, 10, body="x" * 900_000)

    assert poller.drain() == 10

    assert sum(handler.sizes) == 10 and len(handler.sizes) > 1
    assert all(event_bytes(event) <= LAMBDA_SYNC_MAX_PAYLOAD_BYTES for event in handler.events)
    assert event_bytes(handler.events[0]) > LAMBDA_SYNC_MAX_PAYLOAD_BYTES - 1_000_000  # filled
