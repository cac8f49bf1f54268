"""A job closed as "unknown job" and reopened that then ends other than stored: S3 shows its
last outcome, not the record it was first closed with.

Judged from outside: the results bucket's live keys, their versions and the records' text.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.queue import JobMessage, JobQueue
from scrape_pipeline_local.judge import read_listing
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, outcome_keys, truth

# Jobs that run ten minutes, announced early: the API answers 404 for their first five, and
# three 404s close them as "unknown job"; their webhooks then reopen them.
EARLY = {
    "job_duration_min_s": 600,
    "job_duration_max_s": 700,
    "not_found_lag_s": 300,
}


def closed_as_unknown(stack: LocalStack, n: int) -> list[str]:
    """``n`` running jobs the processor closed as unknown (their dead-letter records in S3)."""
    client = stack.client()
    ids = [client.submit_extract(f"https://example.com/early{i}").job_id for i in range(n)]
    assert stack.resources is not None
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    for job_id in ids:
        queue.send(JobMessage(JobKey(JobKind.EXTRACT, job_id), "early"))
    stack.run_until(lambda: all(record(stack, j) is not None for j in ids), step=5.0, limit=600)
    assert all(record(stack, j)["reason"] == "unknown job" for j in ids)  # type: ignore[index]
    return ids


def record(stack: LocalStack, job_id: str) -> dict[str, Any] | None:
    """The job's live dead-letter record, or None."""
    assert stack.resources is not None
    s3 = boto3.client("s3")
    try:
        body = s3.get_object(Bucket=stack.resources.bucket, Key=outcome_keys(job_id)[1])["Body"]
    except s3.exceptions.NoSuchKey:
        return None
    parsed: dict[str, Any] = json.loads(body.read())
    return parsed


def settled(stack: LocalStack, ids: list[str]) -> bool:
    jobs = {j["job_id"]: j for j in truth(stack)}
    return all(jobs[j]["status"] in ("completed", "failed", "cancelled") for j in ids)


@pytest.mark.parametrize(
    ("failure", "last_reason"),
    [("permanent", "not retryable"), ("retryable", None)],
)
def test_reopened_job_ending_dead_lettered_or_resubmitted_shows_its_last_outcome(
    make_stack: MakeStack, failure: str, last_reason: str | None
):
    # GIVEN jobs closed as "unknown job" while running, that will fail for good (permanent)
    # or retryably (resubmitted once, as the budget allows)
    rates = {f"{failure}_failure_rate": 1.0}
    stack = make_stack(
        StackSettings(env={"NOT_FOUND_MAX_TRIES": "3", "MAX_RESUBMISSIONS_PER_URL": "1"}),
        **EARLY,
        **rates,
    )
    ids = closed_as_unknown(stack, 3)

    # WHEN they fail, their webhooks reopen them and the processor settles them again
    stack.run_until(lambda: settled(stack, ids), step=10.0, limit=1800)
    for _ in range(30):
        stack.step(10.0)

    # THEN each live record gives the last outcome: "not retryable", or none at all for a job
    # resubmitted; the first record is kept as history under a delete marker, and nothing was
    # written twice without being taken back first
    assert stack.resources is not None
    listing = read_listing(boto3.client("s3"), stack.resources.bucket)
    for job_id in ids:
        now = record(stack, job_id)
        assert (now or {}).get("reason") == last_reason, (job_id, now)
        dead = outcome_keys(job_id)[1]
        assert listing.versions[dead] - listing.retired[dead] <= 1
    if failure == "retryable":  # the simulator's record: each was resubmitted once
        assert stack.sim.submissions() == {j["url"]: 2 for j in truth(stack) if j["job_id"] in ids}
