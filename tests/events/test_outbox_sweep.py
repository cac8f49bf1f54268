"""The reconciler's outbox sweep against moto: what a crash left is sent after the grace, once.

A crash between DONE and the emit is a row whose event was written and never sent: here,
outcomes finished with their event and no emit, then the sweep run on a manual clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.events.detail import outcome_event
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps.ledger_scans import SWEEP_OUTBOX
from scrape_pipeline_local.clock import ManualClock
from tests.events.bus_fixture import Subscriber, subscribe
from tests.support.template import create_ledger_table

BUS = "sweep-bus"
GRACE = ReconcilerSettings().outbox_grace_seconds


@pytest.fixture
def parts() -> Iterator[tuple[Ledger, Reconciler, Subscriber, ManualClock]]:
    with mock_aws():
        clock = ManualClock()
        db = boto3.client("dynamodb")
        create_ledger_table(db, "ledger")
        ledger = Ledger("ledger", client=db, clock=clock)
        events = boto3.client("events")
        events.create_event_bus(Name=BUS)
        subscriber = subscribe(events, boto3.client("sqs"), BUS)
        reconciler = Reconciler(
            ReconcilerSettings(),
            ledger=ledger,
            client=cast(Any, None),  # the outbox sweep calls neither the API
            recoverer=cast(Any, None),  # nor the queue
            clock=clock,
            emitter=Emitter(BUS, ledger, client=events),
        )
        yield ledger, reconciler, subscriber, clock


def _crashed_after_done(ledger: Ledger, job_id: str, clock: ManualClock) -> None:
    """An outcome written with its event, and the processor killed before emitting it."""
    key = JobKey(JobKind.EXTRACT, job_id)
    assert ledger.acquire(key, "owner", 60, source="test").granted
    event = outcome_event(
        key,
        Outcome.DEAD_LETTERED,
        reopens=0,
        finished_at=clock.time(),
        bucket="b",
        detail={"reason": "not retryable", "record": f"dead-letters/extract/{job_id}.json"},
    )
    assert event is not None
    ledger.finish(key, "owner", Outcome.DEAD_LETTERED, {}, event=event.to_json())


def test_the_sweep_sends_what_a_crash_left_after_the_grace_once(
    parts: tuple[Ledger, Reconciler, Subscriber, ManualClock],
) -> None:
    ledger, reconciler, subscriber, clock = parts
    for n in range(12):
        _crashed_after_done(ledger, f"job-{n}", clock)
    # WHEN the reconciler runs within the grace (a live batch may still emit them)
    clock.advance(GRACE - 1)
    early = ReconcileReport()
    reconciler.run_sweep(SWEEP_OUTBOX, early)
    # THEN nothing is sent
    assert (early.events_sent, subscriber.received()) == (0, [])
    # WHEN it runs after the grace
    clock.advance(2)
    report = ReconcileReport()
    reconciler.run_sweep(SWEEP_OUTBOX, report)
    # THEN each outcome's event came once, a dead letter with its reason, and none is left
    received = subscriber.received()
    assert sorted(e["detail"]["job_id"] for e in received) == sorted(f"job-{n}" for n in range(12))
    assert {e["detail-type"] for e in received} == {"Job Dead-Lettered"}
    assert {e["detail"]["reason"] for e in received} == {"not retryable"}
    assert (report.events_sent, report.events_left, report.outbox_pages) == (12, 0, 1)
    assert ledger.pending_events(before=clock.time() + 1)[0] == []
    # AND a run after that sends nothing again; no job is counted as recovered
    again = ReconcileReport()
    reconciler.run_sweep(SWEEP_OUTBOX, again)
    assert (again.events_sent, subscriber.received()) == (0, [])
    assert SWEEP_OUTBOX not in report.recovered and report.total_recovered == 0


def test_the_sweep_runs_first_and_every_run() -> None:
    from scrape_pipeline.reconciler.run import SWEEP_TABLE, Cadence

    # Late events are what a subscriber waits for: first, at every run (a minute apart).
    first = SWEEP_TABLE[0]
    assert (first.name, first.cadence) == (SWEEP_OUTBOX, Cadence.EVERY_RUN)
