"""The sample events in ``events/`` and its ``env.json``: built here, so tests and
``sam local invoke`` share them.

Regenerate with ``.venv/bin/python -m tests.support.sample_events``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scrape_pipeline.jobs import JobKey, JobKind, Source
from scrape_pipeline.processor.queue import JobMessage
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline_local.translate import template
from scrape_pipeline_ops.samples import SAMPLE_FORGED_SECRET, SAMPLE_SECRET
from scrape_pipeline_ops.signing import sign
from tests.support.events import api_gateway_event, sqs_event

EVENTS_DIR = Path(__file__).resolve().parents[2] / "events"
# Published (events/README.md): for the local stack and sam local invoke only, and doctor fails
# a deployed stack whose bundle holds it (scrape_pipeline_ops/samples.py keeps the list).
TEST_SECRET = SAMPLE_SECRET
_SIGNED_AT = 1_780_000_000.0
# When the sample deliveries say they were sent: the local stack's clock start (ManualClock's
# default), so they are fresh there; anywhere else the freshness window refuses them, like
# any delivery captured long ago.
STAMPED_AT = 1_800_000_000
JOB_ID = "8f14e45f-ceea-467f-a8f5-bd2f1f2a0c11"
POISON_BODY = "this is not a job message"
ACCOUNT = "123456789012"
ENV_FILE = EVENTS_DIR / "env.json"


def _delivery(job_id: str, delivery_id: str) -> bytes:
    envelope = {
        "event": "extract_completed",
        "webhook_id": "wh_sample",
        "delivery_id": delivery_id,
        "timestamp": datetime.fromtimestamp(STAMPED_AT, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": {"job_id": job_id, "status": "completed"},
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


def _headers(delivery_id: str, body: bytes, secret: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "scraper-api-webhook/1.0",
        "X-Webhook-Event": "extract_completed",
        "X-Webhook-Delivery-Id": delivery_id,
        **sign(SignatureConfig(), body, secret, _SIGNED_AT),
    }


def _job_batch() -> dict[str, Any]:
    """The processor's SQS batch: the sample delivery's job, then a message that is no job."""
    job = JobMessage(JobKey(JobKind.EXTRACT, JOB_ID), Source.WEBHOOK).to_json()
    return sqs_event(
        [job, POISON_BODY],
        queue_arn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:scrape-pipeline-JobQueue",
        receipts=[
            ("0b9a36f0-6a7e-4c55-9d63-5d1f2b1c0001", "sample-receipt-handle-job", 1),
            ("0b9a36f0-6a7e-4c55-9d63-5d1f2b1c0002", "sample-receipt-handle-poison", 3),
        ],
    )


def _schedule() -> dict[str, Any]:
    """The reconciler's EventBridge scheduled event (it reads nothing from it)."""
    return {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": "2026-05-27T08:17:00Z",
        "region": "us-east-1",
        "resources": [
            f"arn:aws:events:us-east-1:{ACCOUNT}:rule/scrape-pipeline-ReconcilerFunctionReconcile"
        ],
        "detail": {},
    }


# The local stack's bucket (create.physical_name); a deployed stack's is ResultsBucketName.
SAMPLE_BUCKET = "scrape-pipeline-resultsbucket"
SAMPLE_RUN = "sample-run"


def _run_file_uploaded() -> dict[str, Any]:
    """The submitter's SQS batch: S3's notification of ``submissions/sample-run.txt``."""
    notification = {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventTime": "2027-01-15T08:00:00.000Z",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "sample-notification",
                    "bucket": {"name": SAMPLE_BUCKET, "arn": f"arn:aws:s3:::{SAMPLE_BUCKET}"},
                    "object": {"key": f"submissions/{SAMPLE_RUN}.txt", "size": 64},
                },
            }
        ]
    }
    return sqs_event(
        [json.dumps(notification)],
        queue_arn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:scrape-pipeline-SubmissionsQueue",
        receipts=[("0b9a36f0-6a7e-4c55-9d63-5d1f2b1c0003", "sample-receipt-handle-run", 1)],
    )


def sample_events() -> dict[str, dict[str, Any]]:
    """File name -> event: API Gateway proxy events, an SQS batch, a scheduled event."""
    job = JOB_ID
    valid = _delivery(job, "dlv_0001")
    duplicate = _delivery(job, "dlv_0002")  # the sender's retry: same job, new delivery id
    return {
        "webhook-valid.json": api_gateway_event(valid, _headers("dlv_0001", valid, TEST_SECRET)),
        "webhook-duplicate.json": api_gateway_event(
            duplicate, _headers("dlv_0002", duplicate, TEST_SECRET)
        ),
        "webhook-forged.json": api_gateway_event(
            valid, _headers("dlv_0003", valid, SAMPLE_FORGED_SECRET)
        ),
        "sqs-job-batch.json": _job_batch(),
        "schedule.json": _schedule(),
        "sqs-run-file.json": _run_file_uploaded(),
    }


def env_vars() -> dict[str, dict[str, str]]:
    """``sam local invoke --env-vars``: per function, the variables naming a stack resource.

    SAM passes a function only the variables the template declares for it, so only those are
    here; each value is a placeholder ``<Output>`` naming the stack output that holds the
    resource (``aws cloudformation describe-stacks`` lists them).
    """
    tmpl = template()
    outputs = {
        _ref(output["Value"]): name
        for name, output in tmpl["Outputs"].items()
        if _ref(output["Value"]) is not None
    }
    shared = tmpl["Globals"]["Function"]["Environment"]["Variables"]
    found: dict[str, dict[str, str]] = {}
    for logical_id, resource in tmpl["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        own = resource["Properties"].get("Environment", {}).get("Variables", {})
        variables = {**shared, **own}
        found[logical_id] = {
            name: f"<{outputs[_ref(value)]}>"
            for name, value in sorted(variables.items())
            if _ref(value) in outputs
        } | {"POWERTOOLS_LOG_LEVEL": "DEBUG"}
    return found


def _ref(value: Any) -> str | None:
    """The resource a ``!Ref`` names (YAML loaded as ``{"Ref": name}``), else None."""
    return value.get("Ref") if isinstance(value, dict) and set(value) == {"Ref"} else None


def render(event: dict[str, Any]) -> str:
    """The file text of an event (stable, so the committed files can be compared)."""
    stable = json.loads(json.dumps(event))
    if "requestContext" in stable:
        stable["requestContext"]["requestId"] = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
    return json.dumps(stable, indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Write the events and env.json."""
    for name, event in sample_events().items():
        (EVENTS_DIR / name).write_text(render(event))
    ENV_FILE.write_text(render(env_vars()))


if __name__ == "__main__":
    main()
