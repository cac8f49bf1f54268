"""Outcome events on the local stack: one per outcome by id, and ``events tail`` following the
bus (a crash before the emit: tests/local/test_emit_crash.py).

The stack's bus is created in moto from the template; the tests subscribe to it the way a
user would (a rule with an SQS target) and judge what arrives there, by ``event_id``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.aws_calls import CallRecorder
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack
from scrape_pipeline_ops.cli.main import main
from scrape_pipeline_ops.events_tail import TAIL_PREFIX, BusTail
from tests.events.bus_fixture import Subscriber, subscribe
from tests.pipeline.conftest import QUIET, all_settled_and_done

JOBS = 20


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(ManualClock(), SimConfig(**QUIET)).start()
    yield stack
    stack.stop()


def _subscriber(stack: Any) -> Subscriber:
    assert stack.resources is not None and stack.resources.event_bus
    return subscribe(boto3.client("events"), boto3.client("sqs"), stack.resources.event_bus)


def _submit(stack: Any, prefix: str) -> list[str]:
    client = stack.client()
    return [
        client.submit_extract(f"https://example.com/{prefix}{i}", formats=["markdown"]).job_id
        for i in range(JOBS)
    ]


def _by_job(events: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """Per job id, its event ids and how often each came."""
    out: dict[str, Counter[str]] = {}
    for event in events:
        detail = event["detail"]
        out.setdefault(detail["job_id"], Counter())[detail["event_id"]] += 1
    return out


def test_every_outcome_of_a_run_is_one_event_on_the_bus() -> None:
    # GIVEN the local stack (its AWS calls counted) with a subscriber on its bus, and a run
    # of 20 extract jobs
    with CallRecorder() as recorder:
        stack = LocalStack(ManualClock(), SimConfig(**QUIET)).start()
        try:
            subscriber = _subscriber(stack)
            ids = _submit(stack, "p")
            # WHEN every job settles and is stored
            stack.run_until(all_settled_and_done(stack, JOBS), step=1.0, limit=600)
            stack.settle_now()
            received = subscriber.received()
            bucket = stack.resources.bucket if stack.resources else ""
        finally:
            stack.stop()
    # THEN each job's outcome came as exactly one event, a "Job Stored" naming its objects
    by_job = _by_job(received)
    assert sorted(by_job) == sorted(ids)
    assert all(list(counts.values()) == [1] for counts in by_job.values())
    assert {e["detail-type"] for e in received} == {"Job Stored"}
    some = received[0]["detail"]
    assert some["bucket"] == bucket
    assert f"results/extract/{some['job_id']}/metadata.json" in some["keys"]
    assert some["url"].startswith("https://example.com/p")
    # AND the processor sent them in batches: PutEvents calls per job, from outside
    puts = sum(
        n
        for call, n in recorder.calls.items()
        if (call.principal, call.operation) == ("processor", "PutEvents")
    )
    print(f"PutEvents calls by the processor: {puts} for {JOBS} outcomes")
    assert 1 <= puts <= JOBS // 2


def _tails(stack: LocalStack) -> tuple[list[str], list[str]]:
    """The tail rules on the stack's bus, and the tail queues."""
    assert stack.resources is not None
    rules = boto3.client("events").list_rules(
        EventBusName=stack.resources.event_bus, NamePrefix=TAIL_PREFIX
    )["Rules"]
    queues = boto3.client("sqs").list_queues(QueueNamePrefix=TAIL_PREFIX).get("QueueUrls", [])
    return [r["Name"] for r in rules], list(queues)


def test_events_tail_prints_each_event_and_removes_its_rule_and_queue(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN `events tail` following the local stack's bus (EVENT_BUS_NAME, as `local up` says)
    codes: list[int] = []
    tail = threading.Thread(
        target=lambda: codes.append(main(["events", "tail", "--max-events", "3", "--wait", "0"]))
    )
    tail.start()
    for _ in range(500):
        if _tails(stack)[0]:
            break
        time.sleep(0.01)  # real time: the CLI's thread sets its rule up on moto's server
    assert len(_tails(stack)[0]) == 1
    # WHEN three jobs are stored
    client = stack.client()
    ids = [client.submit_extract(f"https://example.com/t{i}").job_id for i in range(3)]
    stack.run_until(all_settled_and_done(stack, 3), step=1.0, limit=600)
    stack.settle_now()
    tail.join(timeout=30)
    # THEN it printed each one's event as a JSON line, and exited 0
    assert not tail.is_alive() and codes == [0]
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    events = [e for e in printed if e.get("source") == "scrape-pipeline"]
    assert sorted(e["detail"]["job_id"] for e in events) == sorted(ids)
    # AND its rule and queue are gone
    assert _tails(stack) == ([], [])


def test_events_tail_removes_its_rule_and_queue_on_ctrl_c(stack: LocalStack) -> None:
    # GIVEN a tail that is following the bus
    assert stack.resources is not None
    following = BusTail(
        stack.resources.event_bus,
        events=boto3.client("events"),
        sqs=boto3.client("sqs"),
        wait_seconds=0,
    )
    # WHEN Ctrl-C stops it
    with pytest.raises(KeyboardInterrupt), following:
        assert len(_tails(stack)[0]) == 1 and len(_tails(stack)[1]) == 1
        raise KeyboardInterrupt
    # THEN nothing of it is left
    assert _tails(stack) == ([], [])
