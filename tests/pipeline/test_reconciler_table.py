"""The sweep table: a new sweep is one class and one row, run in the table's order, in its
share of the run's time, at its cadence, its failure its own.

moto in-process (real boto3 calls); the judge is what reached SQS and the cadence row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import ServerError
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.bulk_send import BulkSender
from scrape_pipeline.reconciler import run as reconciler_module
from scrape_pipeline.reconciler.recovery import Recoverer
from scrape_pipeline.reconciler.report import SweepResult
from scrape_pipeline.reconciler.run import (
    CADENCE_CHECKPOINT,
    Cadence,
    Reconciler,
    SweepRow,
)
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps import Budget, Sweep
from scrape_pipeline_local.clock import ManualClock
from tests.pipeline.test_reconciler import FakeRemaining
from tests.support.template import create_ledger_table, create_queues


@dataclass
class Probe:
    """What the probe sweeps share: the time left (and their name) as each began."""

    remaining: FakeRemaining
    began: list[tuple[str, float]] = field(default_factory=list)


class FailingProbe(Sweep[Probe]):
    """Recovers two jobs, then the API fails: five seconds of the run spent."""

    name = "failing_probe"

    def work(self, budget: Budget, result: SweepResult) -> None:
        self.settings.began.append((self.name, budget.left()))
        keys = [JobKey(JobKind.EXTRACT, f"probe-{i}") for i in range(2)]
        result.recovered += self._recoverer.ensure_many(keys, {}, source=self.name)
        self.settings.remaining.seconds -= 5.0
        raise ServerError(503, code="UNAVAILABLE", message="probe down")


class QuietProbe(Sweep[Probe]):
    """Finds nothing, and finishes."""

    name = "quiet_probe"

    def work(self, budget: Budget, result: SweepResult) -> None:
        self.settings.began.append((self.name, budget.left()))


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
        queue_url, _ = create_queues(sqs, "jobs")
        yield {"dynamodb": dynamodb, "sqs": sqs, "ledger": create_ledger_table(dynamodb, "l")}
        del queue_url


def test_a_sweep_added_as_one_class_and_one_row_runs_in_its_share_at_its_cadence(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a table of two new sweeps, weights 1 and 3, both at the full-sweep cadence: the
    # first recovers two jobs and then fails
    remaining = FakeRemaining(100.0)
    probe = Probe(remaining)
    table = (
        SweepRow(FailingProbe, lambda s: 1.0, Cadence.FULL_SWEEP, lambda s: probe),
        SweepRow(QuietProbe, lambda s: 3.0, Cadence.FULL_SWEEP, lambda s: probe),
    )
    monkeypatch.setattr(reconciler_module, "SWEEP_TABLE", table)
    clock = ManualClock()
    ledger = Ledger(aws["ledger"], client=aws["dynamodb"], clock=clock)
    queue_url = aws["sqs"].get_queue_url(QueueName="jobs")["QueueUrl"]
    found = Reconciler(
        ReconcilerSettings(),
        ledger=ledger,
        client=GeonodeClient("unused", base_url="http://127.0.0.1:9"),
        recoverer=Recoverer(ledger, BulkSender(queue_url, client=aws["sqs"]), clock=clock),
        clock=clock,
    )
    # WHEN a run has 100 s left (80 after the 20 s margin)
    report = found.run(remaining)
    # THEN the sweeps ran in the table's order, the first in a quarter of the time, the second
    # in all that was left after it
    assert probe.began == [("failing_probe", 20.0), ("quiet_probe", 75.0)]
    # AND the failure is the failing sweep's alone, and the jobs it enqueued first count
    assert set(report.errors) == {"failing_probe"}
    assert "ServerError" in report.errors["failing_probe"]
    assert report.recovered == {"failing_probe": 2, "quiet_probe": 0}
    assert report.complete is False
    messages = aws["sqs"].receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(json.loads(m["Body"])["job_id"] for m in messages) == ["probe-0", "probe-1"]
    # AND only the sweep that finished is remembered as run: a minute later the failed one is
    # due again, the other skipped until its cadence comes round
    cadence = Bookkeeping(ledger).read(CADENCE_CHECKPOINT) or {}
    assert "quiet_probe" in cadence and "failing_probe" not in cadence
    clock.advance(60.0)
    probe.began.clear()
    again = found.run(FakeRemaining(100.0))
    assert [name for name, _ in probe.began] == ["failing_probe"]
    assert again.skipped == ["quiet_probe"]
