"""EventLingerSeconds on the local stack: jobs settling at a nightly pace, their events held in
the warm processor across batches and sent in full calls, each outcome once.

Judged from outside: the result objects in S3, a subscriber's queue on the stack's bus, and
the PutEvents calls the processor made on the wire (botocore's hooks).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import boto3

from scrape_pipeline_local.aws_calls import CallRecorder
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.events.bus_fixture import subscribe
from tests.pipeline.conftest import QUIET, all_settled_and_done, versions

JOBS = 30
LINGER = 30.0
GAP_S = 2.0  # one job submitted every two simulated seconds: a batch holds two or three


def _puts(recorder: CallRecorder, principal: str) -> int:
    return sum(
        n
        for call, n in recorder.calls.items()
        if (call.principal, call.operation) == (principal, "PutEvents")
    )


def test_a_linger_sends_a_nightly_paces_events_in_full_calls_each_once() -> None:
    # GIVEN the local stack with a 30 s linger, a subscriber on its bus, and 30 jobs submitted
    # one every 2 simulated seconds (the template's 5 s window: two or three a batch)
    with CallRecorder() as recorder:
        stack = LocalStack(
            ManualClock(),
            SimConfig(**QUIET),
            StackSettings(env={"EVENT_LINGER_SECONDS": f"{LINGER:g}"}),
        ).start()
        try:
            assert stack.resources is not None and stack.resources.event_bus
            subscriber = subscribe(
                boto3.client("events"), boto3.client("sqs"), stack.resources.event_bus
            )
            client = stack.client()
            ids = []
            for i in range(JOBS):
                ids.append(client.submit_extract(f"https://example.com/l{i}").job_id)
                stack.step(GAP_S)
            # WHEN every job is stored, and the time the last ones may wait has passed
            stack.run_until(all_settled_and_done(stack, JOBS), step=1.0, limit=600)
            assert stack.poller is not None
            batches = stack.poller.batches
            received: list[dict[str, Any]] = []

            def all_told() -> bool:
                received.extend(subscriber.received())  # drained: keep what came
                return len(received) >= JOBS

            stack.run_until(all_told, step=5.0, limit=300)
            stack.step(LINGER)  # nothing more comes: no repeat is on its way
            received.extend(subscriber.received())
            stored = {key.split("/")[2] for key in versions(stack) if key.startswith("results/")}
        finally:
            stack.stop()
    # THEN each stored job's outcome came as exactly one event
    by_job = Counter(e["detail"]["job_id"] for e in received)
    assert sorted(by_job) == sorted(ids) == sorted(stored)
    assert set(by_job.values()) == {1}
    assert len({e["detail"]["event_id"] for e in received}) == JOBS
    # AND they went out ten a call: three calls for thirty outcomes, with at most one short
    # call at the end (the processor's own calls or the outbox sweep's)
    processor, reconciler = _puts(recorder, "processor"), _puts(recorder, "reconciler")
    print(
        f"PutEvents: processor {processor}, reconciler {reconciler} for {JOBS} outcomes "
        f"from {batches} processor batches"
    )
    assert processor + reconciler <= math.ceil(JOBS / 10) + 1
    # AND that is the linger's doing: at this pace the outcomes came in far more batches
    # than calls (without it, every batch with an outcome is a call)
    assert batches >= 2 * (processor + reconciler)
