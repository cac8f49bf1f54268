"""One processor batch on the local stack: what the ledger's batch read cannot say stays per job.

Judged from outside: the results bucket's objects and the dead-letter queue, never the ledger.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse, HTTPHeaders

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.queue import JobMessage, JobQueue
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, dlq_depth, outcome_keys, truth, versions

NO_RECONCILER = 10.0**9  # a schedule that never fires: the test drives what runs
VISIBILITY_TIMEOUT = 360  # JobQueue's, from template.yaml


def settled_jobs(stack: LocalStack, n: int, prefix: str) -> list[str]:
    """``n`` extract jobs the simulator has completed, with no webhook and no message yet."""
    client = stack.client()
    ids = [client.submit_extract(f"https://example.com/{prefix}{i}").job_id for i in range(n)]
    stack.run_until(
        lambda: all(j["status"] == "completed" for j in truth(stack)), step=5.0, limit=300
    )
    return ids


def enqueue(stack: LocalStack, ids: list[str]) -> None:
    assert stack.resources is not None
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    queue.send_many([JobMessage(JobKey(JobKind.EXTRACT, job_id), "test") for job_id in ids])


def test_processor_batch_read_that_never_completes_leaves_the_batch_unordered(
    make_stack: MakeStack,
):
    # GIVEN settled jobs, and DynamoDB answering the processor's every BatchGetItem with all
    # of its keys unprocessed (what a throttled table does under load)
    stack = make_stack(StackSettings(webhooks=False, reconcile_interval=NO_RECONCILER))
    ids = settled_jobs(stack, 6, "unprocessed")
    processor = stack.handlers["processor"].get_processor()[0]
    dynamodb = processor._ledger._db
    reads: list[int] = []

    def all_unprocessed(params: dict[str, Any], **_: Any) -> Any:
        request = json.loads(params["body"])["RequestItems"]
        reads.append(len(request))
        response = AWSResponse(params["url"], 200, HTTPHeaders(), None)
        return response, {
            "Responses": {},
            "UnprocessedKeys": request,
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }

    dynamodb.meta.events.register("before-call.dynamodb.BatchGetItem", all_unprocessed)

    # WHEN their messages arrive in one batch
    enqueue(stack, ids)
    # (before the fix, each invocation raised and the messages came back after their
    # visibility timeout, round the redrive count into the DLQ)
    stack.run_until(
        lambda: all(outcome_keys(j)[0] in versions(stack) for j in ids),
        step=5.0,
        limit=VISIBILITY_TIMEOUT - 10,
    )

    # THEN every job is stored once at its first delivery (no visibility timeout waited out),
    # and no message went to the DLQ
    assert reads, "the batch read was never attempted"
    seen = versions(stack)
    assert all(seen[outcome_keys(j)[0]] == 1 for j in ids)
    assert dlq_depth(stack) == 0
