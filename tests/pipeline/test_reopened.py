"""A job closed as "unknown job" and reopened that then ends other than stored: S3 shows its
last outcome, not the record it was first closed with.

Judged from outside: the results bucket's live keys, their versions and the records' text.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline_local.judge import read_listing
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, outcome_keys, truth, versions
from tests.pipeline.direct import NO_RECONCILER, all_stored

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


STALE_AFTER = 900  # the stale-row sweep's bound (RecoverySettings): what must not be waited for


def fail_first(client: Any, operation: str, times: int) -> list[str]:
    """Make ``client``'s first ``times`` ``operation`` calls answer 500; returns a log."""
    failed: list[str] = []

    def once(params: dict[str, Any], **_: Any) -> Any:
        if len(failed) >= times:
            return None
        failed.append(operation)
        response = AWSResponse(params["url"], 500, HTTPHeaders(), None)
        error = {
            "Error": {"Code": "InternalFailure", "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": 500},
        }
        return response, error

    client.meta.events.register(f"before-call.sqs.{operation}", once)
    return failed


@pytest.mark.parametrize("evidence", ["webhook", "job_list"])
def test_reopened_job_whose_message_could_not_be_sent_is_reopened_again_soon(
    make_stack: MakeStack, evidence: str
):
    # GIVEN jobs closed as "unknown job" while running; the evidence that they settled is
    # their webhook, or (every webhook lost) the job list; and the first message that evidence
    # sends fails (SQS answers 500)
    # (with webhooks, no reconciler: its job list would reopen them before they settle)
    stack = make_stack(
        StackSettings(
            env={"NOT_FOUND_MAX_TRIES": "3", "RECONCILE_OVERLAP_SECONDS": "400"},
            reconcile_interval=None if evidence == "job_list" else NO_RECONCILER,
        ),
        **EARLY,
    )
    if evidence == "job_list":
        stack.sim.faults.update(drop_rate=1.0)
        sqs = stack.handlers["reconciler"].get_reconciler()._recoverer._queue._sqs
        # twice: the batch send's own second try fails too
        failed = fail_first(sqs, "SendMessageBatch", 2)
    else:
        sqs = stack.handlers["receiver"].get_receiver().queue._sqs
        failed = fail_first(sqs, "SendMessage", 1)
    ids = closed_as_unknown(stack, 3)
    started = stack.clock.time()

    # WHEN they complete, and the pipeline runs
    stack.run_until(lambda: all_stored(stack, ids), step=10.0, limit=STALE_AFTER)

    # THEN the failed send was undone and the evidence's next try (the sender's retry, the
    # next reconciler run) reopened them again: stored long before the stale-row sweep would
    # have found rows left ENQUEUED with no message, and once each
    assert failed == [failed[0]] * (2 if evidence == "job_list" else 1)
    completed = max(j["settled_at"] for j in truth(stack) if j["job_id"] in ids)
    assert stack.clock.time() - max(started, completed) < STALE_AFTER / 2
    assert all(versions(stack)[outcome_keys(j)[0]] == 1 for j in ids)
