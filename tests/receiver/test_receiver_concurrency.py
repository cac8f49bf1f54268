"""Concurrent and crashed deliveries: moto in server mode (real HTTP, thread-safe)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import httpx
import pytest

from scrape_pipeline.clock import SYSTEM_CLOCK
from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline.receiver.webhook import Receiver, ReceiverSettings
from scrape_pipeline.wiring.receiver import build_receiver
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_ops.signing import sign
from tests.receiver.conftest import SECRET, bundle, delivery_body
from tests.support.template import create_ledger_table, create_queues, create_secret, moto_server


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server, url = moto_server()
    yield url
    server.stop()


@pytest.fixture
def env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Fresh resources in the moto server; the environment a deployed receiver would have."""
    httpx.post(f"{endpoint}/moto-api/reset")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    dynamodb = boto3.client("dynamodb")
    create_ledger_table(dynamodb, "ledger")
    queue_url, _ = create_queues(boto3.client("sqs"), "jobs")
    arn = create_secret(boto3.client("secretsmanager"), "hooks", bundle((SECRET, None)))
    values = {"LEDGER_TABLE_NAME": "ledger", "QUEUE_URL": queue_url, "WEBHOOK_SECRET_ID": arn}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def queue_depth(queue_url: str) -> int:
    attrs = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def test_receiver_50_concurrent_duplicates_enqueue_once(env: dict[str, str]):
    # GIVEN 50 receiver containers and one job delivered to all of them at the same instant
    receivers = [build_receiver(os.environ, clock=SYSTEM_CLOCK) for _ in range(50)]
    body = delivery_body("race-1")
    headers = sign(SignatureConfig(), body, SECRET, time.time())
    start = threading.Barrier(50)

    def deliver(receiver: Receiver) -> tuple[int, str]:
        start.wait()
        answer = receiver.handle(body, headers)
        return answer.status, answer.body.get("status", "")

    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(deliver, receivers))

    # THEN every sender hears 2xx, and the job is recorded and enqueued exactly once
    assert all(status == 200 for status, _ in answers)
    assert [s for _, s in answers].count("accepted") == 1
    assert [s for _, s in answers].count("duplicate") == 49
    assert queue_depth(env["QUEUE_URL"]) == 1


def _receiver_with_clock(clock: ManualClock) -> Receiver:
    return build_receiver(os.environ, clock=clock)


def test_receiver_recovers_row_left_by_crash_between_put_and_send(env: dict[str, str]):
    # GIVEN a receiver that died after its ledger put and before its SQS send
    clock = ManualClock(start=time.time())
    key = JobKey(JobKind.EXTRACT, "crashed-1")
    Ledger("ledger", client=boto3.client("dynamodb"), clock=clock).record(key, source="webhook")
    receiver = _receiver_with_clock(clock)
    body = delivery_body("crashed-1")

    # WHEN the sender retries soon after: still a duplicate (the writer may be alive)
    early = receiver.handle(body, sign(SignatureConfig(), body, SECRET, clock.time()))
    clock.advance(ReceiverSettings.resend_after_seconds + 1)
    late = receiver.handle(body, sign(SignatureConfig(), body, SECRET, clock.time()))
    later = receiver.handle(body, sign(SignatureConfig(), body, SECRET, clock.time()))

    # THEN the retry past the bound enqueues it once, and marks the row so no one resends
    assert (early.status, early.outcome) == (200, "duplicate")
    assert (late.status, late.outcome) == (200, "recovered")
    assert later.outcome == "duplicate"
    assert queue_depth(env["QUEUE_URL"]) == 1
    row = Ledger("ledger", client=boto3.client("dynamodb")).get(key)
    assert row is not None and row.state is JobState.ENQUEUED


def test_receiver_message_is_job_id_only(env: dict[str, str]):
    body = delivery_body("m-1")
    answer = build_receiver(os.environ, clock=SYSTEM_CLOCK).handle(
        body, sign(SignatureConfig(), body, SECRET, time.time())
    )
    assert answer.status == 200
    messages = boto3.client("sqs").receive_message(
        QueueUrl=env["QUEUE_URL"], MaxNumberOfMessages=10
    )["Messages"]
    assert [json.loads(m["Body"]) for m in messages] == [
        {"kind": "extract", "job_id": "m-1", "source": "webhook"}
    ]


def test_receiver_enqueues_first_webhook_of_an_announced_batch(env: dict[str, str]):
    from scrape_pipeline_ops.submissions import expect

    # GIVEN a batch its submitter announced to the ledger (no API lists batches)
    book = Ledger("ledger", client=boto3.client("dynamodb"))
    expect(book, JobKind.BATCH, "batch-1")
    receiver = build_receiver(os.environ, clock=SYSTEM_CLOCK)
    body = delivery_body("batch-1", event="batch_completed")
    # WHEN its webhook arrives, twice
    first = receiver.handle(body, sign(SignatureConfig(), body, SECRET, time.time()))
    second = receiver.handle(body, sign(SignatureConfig(), body, SECRET, time.time()))
    # THEN the first is taken as new and enqueued once; the second is a duplicate
    assert (first.status, first.outcome) == (200, "accepted")
    assert second.outcome == "duplicate"
    assert queue_depth(env["QUEUE_URL"]) == 1
    row = book.get(JobKey(JobKind.BATCH, "batch-1"))
    assert row is not None and row.state is JobState.ENQUEUED
