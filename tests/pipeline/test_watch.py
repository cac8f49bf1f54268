"""The watch sweep on its own: wakes what is due, page by page, and resumes where it stopped.

moto in-process (real boto3 calls); the messages it sends are read back from SQS, the judge.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.budget import Budget, unlimited
from scrape_pipeline.geonode import GeonodeClient
from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger import Ledger
from scrape_pipeline.queue import JobQueue
from scrape_pipeline.recovery import Recoverer
from scrape_pipeline.watch import ROWS_PER_PAGE, Watcher, WatchSettings
from scrape_pipeline_local.clock import ManualClock
from tests.support.template import create_ledger_table, create_queues

POLL = 3600.0
WATCHED = 250


class PagesBudget(Budget):
    """A budget spent after ``pages`` checks: a run that has time for that many pages."""

    def __init__(self, pages: int) -> None:
        super().__init__(unlimited, 0.0)
        self.left_checks = pages

    def spent(self) -> bool:
        self.left_checks -= 1
        return self.left_checks < 0


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
        queue_url, _ = create_queues(sqs, "jobs")
        yield {
            "dynamodb": dynamodb,
            "sqs": sqs,
            "table": create_ledger_table(dynamodb, "ledger"),
            "queue": queue_url,
        }


def sent(aws: dict[str, Any]) -> Counter[str]:
    """Job ids enqueued so far (received and deleted)."""
    out: Counter[str] = Counter()
    while True:
        got = (
            aws["sqs"]
            .receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10)
            .get("Messages", [])
        )
        if not got:
            return out
        for message in got:
            out[json.loads(message["Body"])["job_id"]] += 1
            aws["sqs"].delete_message(QueueUrl=aws["queue"], ReceiptHandle=message["ReceiptHandle"])


def test_watch_sweep_polls_due_batches_page_by_page_and_resumes(aws: dict[str, Any]):
    # GIVEN 250 watched batches parked two hours ago (due a poll), and runs with time for one
    # ledger page each
    clock = ManualClock()
    ledger = Ledger(aws["table"], client=aws["dynamodb"], clock=clock)
    for i in range(WATCHED):
        ledger.record(JobKey(JobKind.BATCH, f"b{i:03d}"), source="test", state=JobState.WATCHING)
    clock.advance(2 * POLL)
    watcher = Watcher(
        WatchSettings(poll_seconds=POLL),
        ledger=ledger,
        # No extract job is watched: the API is never asked (an unreachable address says so).
        client=GeonodeClient("unused", base_url="http://127.0.0.1:9"),
        recoverer=Recoverer(ledger, JobQueue(aws["queue"], client=aws["sqs"]), clock=clock),
        clock=clock,
    )

    # WHEN three runs go by
    results = [watcher.sweep(PagesBudget(1)) for _ in range(3)]

    # THEN each run woke one page more, the last one finished, and each batch was woken once
    assert [r.woken for r in results] == [ROWS_PER_PAGE, ROWS_PER_PAGE, WATCHED - 2 * ROWS_PER_PAGE]
    assert [r.complete for r in results] == [False, False, True]
    woken = sent(aws)
    assert len(woken) == WATCHED and set(woken.values()) == {1}
    # AND a batch parked just now is not due before its poll interval has passed
    ledger.record(JobKey(JobKind.BATCH, "fresh"), source="test", state=JobState.WATCHING)
    assert watcher.sweep(PagesBudget(10)).woken == 0
    clock.advance(POLL)
    assert watcher.sweep(PagesBudget(10)).woken == 1
    assert sent(aws) == Counter({"fresh": 1})
