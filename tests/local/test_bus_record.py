"""The demo's events figures: each job with a told outcome against the events received."""

from __future__ import annotations

import json

import boto3
from moto import mock_aws

from scrape_pipeline_local.aws_calls import acting_as
from scrape_pipeline_local.bus_record import Arrival, WireTimes, figures
from scrape_pipeline_local.judge import Outcome, Unit
from scrape_pipeline_local.moto_server import forget_cached_clients


def _arrival(event_id: str, job_id: str, at: float, kind: str = "extract") -> Arrival:
    return Arrival(event_id, "Job Stored", kind, job_id, arrived_at=at, stored_at=100.0)


def test_a_job_with_a_told_outcome_and_no_event_is_counted_and_named():
    # GIVEN a stored extract, a stored batch (two items), a dead letter and a resubmission
    outcomes = {
        Unit("extract", "e1", None): Outcome.STORED,
        Unit("batch", "b1", 0): Outcome.STORED,
        Unit("batch", "b1", 1): Outcome.DEAD_LETTERED,
        Unit("extract", "e2", None): Outcome.DEAD_LETTERED,
        Unit("extract", "e3", None): Outcome.RESUBMITTED,
    }
    # WHEN the bus brought the extract's event twice and the batch's once
    arrivals = [
        _arrival("a", "e1", 100.5),
        _arrival("a", "e1", 190.0),
        _arrival("b", "b1", 101.0, "batch"),
    ]
    found = figures(outcomes, arrivals, WireTimes())
    # THEN the dead letter lacks its event (a resubmission owes none), the repeat is counted,
    # and each stored job's latency runs to its event's first arrival
    assert (found.without_event, found.without_examples) == (1, ["extract e2"])
    assert found.repeats == 1
    assert found.received == {"Job Stored": 3}
    assert sorted(found.latencies) == [0.5, 1.0]
    assert found.latency_p99 == 1.0


def test_a_batch_whose_item_retry_still_runs_owes_no_event_yet():
    # GIVEN two batches with stored items and no event, one of them with a retry still running
    outcomes = {
        Unit("batch", "b1", 0): Outcome.STORED,
        Unit("batch", "b2", 0): Outcome.STORED,
    }
    # WHEN judged with b1 pending
    found = figures(outcomes, [], WireTimes(), pending={("batch", "b1")})
    # THEN only b2 is an outcome without its event
    assert (found.without_event, found.without_examples) == (1, ["batch b2"])


def test_wire_times_sees_each_events_done_write_and_who_put_it_first():
    # GIVEN the recorder entered before a session is made, and moto
    with mock_aws(), WireTimes() as wire:
        boto3.setup_default_session()
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(
            TableName="rows",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        events = boto3.client("events", region_name="us-east-1")
        ids = ("a" * 32, "b" * 32)
        # WHEN two outcomes are written with their events (the outbox's JSON on the row), and
        # the processor puts the first, the reconciler's sweep the second
        for event_id in ids:
            text = json.dumps({"detail": {"event_id": event_id}}, separators=(",", ":"))
            item = {"pk": {"S": event_id}, "outbox_event": {"S": text}}
            db.put_item(TableName="rows", Item=item)
        for principal, event_id in zip(("processor", "reconciler"), ids, strict=True):
            detail = json.dumps({"event_id": event_id}, separators=(",", ":"))
            with acting_as(principal):
                events.put_events(
                    Entries=[
                        {"Source": "scrape-pipeline", "DetailType": "Job Stored", "Detail": detail}
                    ]
                )
    forget_cached_clients()  # the default session made here points at the mock
    # THEN the first's wait runs from its write to the processor's PutEvents; the second is
    # the sweep's, its wait left to the stack's clock
    assert set(wire.written) == set(ids)
    assert ids[0] in wire.put and wire.waited(ids[0]) >= 0.0
    assert wire.swept == {ids[1]} and wire.waited(ids[1]) == 0.0
