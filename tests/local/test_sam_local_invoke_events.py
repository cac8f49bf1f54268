"""``events/`` and ``events/env.json``: what ``sam local invoke`` gets, run on the local stack."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline.receiver.signatures.secret import WebhookSecret, WebhookSecrets
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_local.translate import template
from tests.support.events import response_json
from tests.support.sample_events import (
    ENV_FILE,
    EVENTS_DIR,
    SAMPLE_BUCKET,
    SAMPLE_RUN,
    TEST_SECRET,
    env_vars,
    render,
)

QUIET = SimConfig(seed=3, rate_limit_per_s=0, webhook_jitter=0.0)


def _event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text())
    return event


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(ManualClock(), QUIET, StackSettings(webhooks=False)).start()
    yield stack
    stack.stop()


def test_env_json_matches_its_generator():
    assert ENV_FILE.read_text() == render(env_vars()), (
        "regenerate: python -m tests.support.sample_events"
    )


def test_env_json_sets_only_what_sam_passes_each_function():
    # SAM gives a function only the variables its template declares: any other is dropped silently
    tmpl = template()
    shared = set(tmpl["Globals"]["Function"]["Environment"]["Variables"])
    functions = {
        logical_id: shared | set(resource["Properties"]["Environment"]["Variables"])
        for logical_id, resource in tmpl["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    env = json.loads(ENV_FILE.read_text())
    assert set(env) == set(functions)
    for logical_id, variables in env.items():
        assert set(variables) <= functions[logical_id], logical_id
        for value in variables.values():
            if value.startswith("<"):
                assert value.strip("<>") in tmpl["Outputs"]


def test_each_sample_event_runs_on_its_function_in_the_local_stack(stack: LocalStack):
    # GIVEN the local stack, its webhook secret the one the sample deliveries are signed with
    assert stack.resources is not None
    stack.store_secrets(WebhookSecrets(shared=(WebhookSecret(TEST_SECRET),)))
    r = stack.resources
    outputs = {
        "LedgerTableName": r.table,
        "JobQueueUrl": r.queue_url,
        "ResultsBucketName": r.bucket,
        "EventBusName": r.event_bus,
        "WebhookSecretArn": r.webhook_secret_arn,
        "GeonodeApiKeySecretArn": r.api_key_secret_arn,
    }
    assert stack.submissions is not None
    outputs["SubmissionsQueueUrl"] = stack.submissions.queue_url
    # env.json's placeholders name what the stack's functions really use (the submitter's
    # queue is its own variable, not the process's)
    seen = {**os.environ, "SUBMISSIONS_QUEUE_URL": stack.submissions.queue_url}
    for variables in json.loads(ENV_FILE.read_text()).values():
        for name, value in variables.items():
            if value.startswith("<"):
                assert seen[name] == outputs[value.strip("<>")], name

    # WHEN each event is invoked on its function, as `sam local invoke <Function> -e <file>`
    answers = {
        name: stack.invoke("ReceiverFunction", _event(name))
        for name in ("webhook-valid.json", "webhook-duplicate.json", "webhook-forged.json")
    }
    batch = stack.invoke("ProcessorFunction", _event("sqs-job-batch.json"))
    run = stack.invoke("ReconcilerFunction", _event("schedule.json"))
    sample_urls = [f"https://example.com/sample/{i}" for i in range(3)]
    boto3.client("s3").put_object(
        Bucket=r.bucket, Key=f"submissions/{SAMPLE_RUN}.txt", Body="\n".join(sample_urls).encode()
    )
    posted_before = stack.sim.submissions()
    submitted = stack.invoke("SubmitterFunction", _event("sqs-run-file.json"))

    # THEN the valid delivery verifies and is accepted, its retry is a duplicate, the forgery 401
    assert all(outcome.ok for outcome in answers.values())
    valid = answers["webhook-valid.json"].result
    assert valid["statusCode"] == 200 and response_json(valid)["status"] == "accepted"
    duplicate = answers["webhook-duplicate.json"].result
    assert duplicate["statusCode"] == 200 and response_json(duplicate)["status"] == "duplicate"
    assert answers["webhook-forged.json"].result["statusCode"] == 401
    # the batch's poison message is reported failed (SQS redrives it to the DLQ in the end)
    assert batch.ok, batch.error
    failed = {item["itemIdentifier"] for item in batch.result["batchItemFailures"]}
    poison = _event("sqs-job-batch.json")["Records"][1]["messageId"]
    assert poison in failed
    # and the scheduled run completes
    assert run.ok, run.error
    # and the run file's URLs are each posted once (the upload's own notification, sent by
    # moto to the submissions queue, is not polled here)
    assert submitted.ok, submitted.error
    assert submitted.result == {"batchItemFailures": []}
    posted = stack.sim.submissions()
    assert {u: posted.get(u, 0) - posted_before.get(u, 0) for u in sample_urls} == {
        u: 1 for u in sample_urls
    }
    assert r.bucket == SAMPLE_BUCKET
