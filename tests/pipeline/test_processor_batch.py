"""One processor batch on the local stack: what the ledger's batch read cannot say stays per job.

Judged from outside: the results bucket's objects and the dead-letter queue, never the ledger.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

from tests.pipeline.conftest import MakeStack, dlq_depth, outcome_keys, versions
from tests.pipeline.direct import all_stored, enqueue, quiet_stack, settled_jobs

VISIBILITY_TIMEOUT = 360  # JobQueue's, from template.yaml


def test_processor_batch_read_that_never_completes_leaves_the_batch_unordered(
    make_stack: MakeStack,
):
    # GIVEN settled jobs, and DynamoDB answering the processor's every BatchGetItem with all
    # of its keys unprocessed (what a throttled table does under load)
    stack = quiet_stack(make_stack)
    ids = settled_jobs(stack, 6, "unprocessed")
    processor = stack.handlers["processor"].get_processor()[0]
    dynamodb = processor._ledger.client
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
    stack.run_until(lambda: all_stored(stack, ids), step=5.0, limit=VISIBILITY_TIMEOUT - 10)

    # THEN every job is stored once at its first delivery (no visibility timeout waited out),
    # and no message went to the DLQ
    assert reads, "the batch read was never attempted"
    seen = versions(stack)
    assert all(seen[outcome_keys(j)[0]] == 1 for j in ids)
    assert dlq_depth(stack) == 0
