"""The reconciler's own health metrics, read from the EMF lines of real scheduled invocations,
and checked against the alarms template.yaml translates to (the same names, the same
dimension sets: CloudWatch matches both exactly)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import ServerError
from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.reconciler.report import ReconcilerMetric
from scrape_pipeline.reconciler.run import oldest_unsettled_age
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_local.translate import resources_of_type, translate
from tests.pipeline.conftest import MakeStack
from tests.support.sample_events import sample_events

NO_SCHEDULE = 10.0**9  # runs are called by hand


def invoke(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """One scheduled invocation of the reconciler Lambda, under the environment and timeout
    template.yaml gives it (as `sam local invoke`); the EMF blobs it printed."""
    capsys.readouterr()
    outcome = stack.invoke("ReconcilerFunction", sample_events()["schedule.json"])
    assert outcome.ok, outcome
    out = capsys.readouterr().out.splitlines()
    return [json.loads(line) for line in out if '"_aws"' in line]


def series(blobs: list[dict[str, Any]]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """(metric, its dimensions and their values) -> the value, as CloudWatch would file it."""
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for blob in blobs:
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                dims = frozenset((d, blob[d]) for d in dimension_set)
                for metric in directive["Metrics"]:
                    value = blob[metric["Name"]]  # one value, or a list of one
                    (found[(metric["Name"], dims)],) = value if isinstance(value, list) else [value]
    return found


SERVICE = frozenset({("service", "reconciler")})


def test_a_run_whose_sweep_fails_emits_the_failure_and_still_its_heartbeat(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # GIVEN a stack whose delivery log answers 503 every time
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    found = stack.handlers["reconciler"].get_reconciler()

    def broken(webhook_id: str, **kwargs: Any) -> Any:
        raise ServerError(503, code="UNAVAILABLE", message="delivery log down")

    monkeypatch.setattr(found._client, "list_deliveries", broken)
    # WHEN the scheduled Lambda runs
    emitted = series(invoke(stack, capsys))
    # THEN the run counted one failed sweep in the alarm's series (service alone) and by sweep
    assert emitted[(ReconcilerMetric.SWEEP_FAILED, SERVICE)] == 1.0
    by_sweep = SERVICE | {("sweep", "delivery_log")}
    assert emitted[(ReconcilerMetric.SWEEP_FAILED, by_sweep)] == 1.0
    # AND it completed: the heartbeat is there, and nothing is owed
    assert emitted[(ReconcilerMetric.RUN_COMPLETED, SERVICE)] == 1.0
    assert emitted[(ReconcilerMetric.OLDEST_UNSETTLED, SERVICE)] == 0.0


def test_a_clean_run_emits_zero_failures_and_the_oldest_unsettled_rows_age(
    make_stack: MakeStack, capsys: pytest.CaptureFixture[str]
):
    # GIVEN a job whose holder died with a long lease (no sweep moves it) 400 s ago, and a job
    # stored as usual
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    assert stack.resources is not None
    book = Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)
    book.acquire(JobKey(JobKind.EXTRACT, "held-by-the-dead"), "dead-worker", 3600, source="sqs")
    stack.client().submit_extract("https://example.com/stored")
    for _ in range(40):
        stack.step(10.0)
    # WHEN the scheduled Lambda runs
    emitted = series(invoke(stack, capsys))
    # THEN no sweep failed, the run completed, and the lag is the held row's age
    assert emitted[(ReconcilerMetric.SWEEP_FAILED, SERVICE)] == 0.0
    assert emitted[(ReconcilerMetric.RUN_COMPLETED, SERVICE)] == 1.0
    assert 400.0 <= emitted[(ReconcilerMetric.OLDEST_UNSETTLED, SERVICE)] < 460.0


def test_every_reconciler_alarm_reads_a_series_a_real_run_emits(
    make_stack: MakeStack, capsys: pytest.CaptureFixture[str]
):
    # GIVEN the series of one scheduled run, and the alarms SAM translates template.yaml to
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    emitted = series(invoke(stack, capsys))
    alarms = {
        name: alarm["Properties"]
        for name, alarm in resources_of_type(translate(), "AWS::CloudWatch::Alarm").items()
        if {"Name": "service", "Value": "reconciler"} in alarm["Properties"]["Dimensions"]
    }
    assert {"ReconcileSweepFailedAlarm", "ReconcilerHeartbeatAlarm", "OldestUnsettledAlarm"} <= set(
        alarms
    )
    # THEN each alarm's metric name and dimension set is one the run emitted, string for string
    for name, alarm in alarms.items():
        dims = frozenset((d["Name"], d["Value"]) for d in alarm["Dimensions"])
        assert (alarm["MetricName"], dims) in emitted, name


def test_a_run_that_cannot_measure_its_lag_still_reports_the_rest(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # GIVEN a ledger whose index queries are throttled
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    ledger = stack.handlers["reconciler"].get_reconciler()._ledger

    def throttled(*args: Any, **kwargs: Any) -> Any:
        raise AWSUnavailableError("dynamodb", "Query", "ThrottlingException")

    monkeypatch.setattr(ledger, "pending", throttled)
    # WHEN the scheduled Lambda runs
    emitted = series(invoke(stack, capsys))
    # THEN the stuck-rows sweep failed (it queries the same index), the run completed, and the
    # lag is left out rather than reported as 0 (its alarm does not read "missing" as healthy
    # work: the heartbeat and failed-sweep alarms cover the run)
    assert emitted[(ReconcilerMetric.SWEEP_FAILED, SERVICE)] >= 1.0
    assert emitted[(ReconcilerMetric.RUN_COMPLETED, SERVICE)] == 1.0
    assert (ReconcilerMetric.OLDEST_UNSETTLED, SERVICE) not in emitted


def test_the_lag_is_the_oldest_owed_row_and_leaves_watching_jobs_out(make_stack: MakeStack):
    # GIVEN a job parked WATCHING (running for days) at t0, then at t0 + 200 s one row each
    # RECEIVED, PROCESSING and, at t0 + 300 s, DONE
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    assert stack.resources is not None
    book = Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)
    running = JobKey(JobKind.EXTRACT, "running-for-days")
    book.acquire(running, "worker", 60, source="sqs")
    book.watch(running, "worker", job_created_at=stack.clock.time())
    start = stack.clock.time()
    stack.clock.advance(200.0)
    book.record(JobKey(JobKind.EXTRACT, "received"), source="webhook")
    book.acquire(JobKey(JobKind.EXTRACT, "held"), "worker", 3600, source="sqs")
    # WHEN the lag is measured at t0 + 600 s
    stack.clock.advance(400.0)
    age = oldest_unsettled_age(book, stack.clock.time())
    # THEN it is the owed rows' oldest wait (400 s), not the watched job's (600 s)
    assert book.get(running).state is JobState.WATCHING  # type: ignore[union-attr]
    assert stack.clock.time() - start == 600.0
    assert age == 400.0
    # AND with nothing owed it is 0
    assert oldest_unsettled_age(book, start - 1.0) == 0.0
