"""``events/`` and ``events/env.json``: what ``sam local invoke`` gets, run on the local stack."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from scrape_pipeline.signatures import WebhookSecret, WebhookSecrets
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_local.translate import template
from tests.support.events import response_json
from tests.support.sample_events import (
    ENV_FILE,
    EVENTS_DIR,
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
        "WebhookSecretArn": r.webhook_secret_arn,
        "GeonodeApiKeySecretArn": r.api_key_secret_arn,
    }
    # env.json's placeholders name what the stack's functions really use
    for variables in json.loads(ENV_FILE.read_text()).values():
        for name, value in variables.items():
            if value.startswith("<"):
                assert os.environ[name] == outputs[value.strip("<>")], name

    # WHEN each event is invoked on its function, as `sam local invoke <Function> -e <file>`
    answers = {
        name: stack.invoke("ReceiverFunction", _event(name))
        for name in ("webhook-valid.json", "webhook-duplicate.json", "webhook-forged.json")
    }
    batch = stack.invoke("ProcessorFunction", _event("sqs-job-batch.json"))
    run = stack.invoke("ReconcilerFunction", _event("schedule.json"))

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
