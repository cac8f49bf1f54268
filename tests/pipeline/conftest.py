"""The whole pipeline on a manual clock: fixtures and checks made from outside the pipeline.

"Lost" and "twice" are judged against the simulator's record of what happened and against S3's
object versions, never against the ledger's word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings

QUIET: dict[str, Any] = {
    "seed": 3,
    "rate_limit_per_s": 0,
    "retryable_failure_rate": 0.0,
    "permanent_failure_rate": 0.0,
    "webhook_retry_schedule_s": (0, 5, 300, 1800),
    "webhook_jitter": 0.0,
}

MakeStack = Callable[..., LocalStack]


@pytest.fixture
def make_stack() -> Iterator[MakeStack]:
    started: list[LocalStack] = []

    def make(settings: StackSettings | None = None, **sim: Any) -> LocalStack:
        stack = LocalStack(ManualClock(), SimConfig(**{**QUIET, **sim}), settings).start()
        started.append(stack)
        return stack

    yield make
    for stack in started:
        stack.stop()


def versions(stack: LocalStack) -> Counter[str]:
    """Object versions per key in the results bucket (2 would mean written twice)."""
    assert stack.resources is not None
    s3 = boto3.client("s3")
    counts: Counter[str] = Counter()
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=stack.resources.bucket):
        for version in page.get("Versions", []):
            counts[version["Key"]] += 1
    return counts


def stored_versions(stack: LocalStack) -> Counter[str]:
    """``versions`` for a stop predicate at every step: S3's same counts, read from moto in this
    process without its listing (which deep-copies every version); judgements call ``versions``."""
    assert stack.moto is not None and stack.resources is not None
    return stack.moto.object_versions(stack.resources.bucket)


def dlq_depth(stack: LocalStack) -> int:
    """Messages in the job queue's dead-letter queue (SQS's approximation)."""
    assert stack.resources is not None
    attrs = boto3.client("sqs").get_queue_attributes(
        QueueUrl=stack.resources.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"])


def truth(stack: LocalStack, kind: str = "extract") -> list[dict[str, Any]]:
    """The simulator's record of every job of ``kind``."""
    assert stack.simulator is not None
    return stack.sim.truth_jobs(kind)


def outcome_keys(job_id: str, kind: str = "extract") -> tuple[str, str]:
    return f"results/{kind}/{job_id}/metadata.json", f"dead-letters/{kind}/{job_id}.json"


def check_exactly_once(stack: LocalStack, kind: str = "extract") -> dict[str, int]:
    """Every settled job has exactly one outcome object, written once. Returns counts."""
    seen = versions(stack)
    assert max(seen.values(), default=1) == 1, (
        f"written twice: {[k for k, n in seen.items() if n > 1]}"
    )
    tally: Counter[str] = Counter()
    for job in truth(stack, kind):
        if job["status"] not in ("completed", "failed", "cancelled"):
            continue
        result, dead = outcome_keys(job["job_id"], kind)
        if result in seen:
            tally["stored"] += 1
        elif dead in seen:
            tally["dead_lettered"] += 1
        elif job["status"] == "failed" and job["retryable"]:
            tally["resubmitted"] += 1  # checked against submissions by the caller
        else:
            tally["lost"] += 1
    assert tally["lost"] == 0, f"lost {tally['lost']} jobs"
    return dict(tally)


def all_settled_and_done(stack: LocalStack, expected: int) -> Callable[[], bool]:
    """True once ``expected`` extract jobs settled and each has its outcome in S3."""

    def done() -> bool:
        jobs = truth(stack)
        if len(jobs) < expected or any(j["status"] in ("queued", "processing") for j in jobs):
            return False
        seen = stored_versions(stack)
        for job in jobs:
            result, dead = outcome_keys(job["job_id"])
            if (
                result not in seen
                and dead not in seen
                and not (job["status"] == "failed" and job["retryable"])
            ):
                return False
        return True

    return done
