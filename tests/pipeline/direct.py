"""Jobs settled in the simulator and put on the queue by the test itself (no webhook, no
reconciler): for tests that decide exactly which messages the processor sees."""

from __future__ import annotations

import boto3

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.processor.bulk_send import BulkSender
from scrape_pipeline.processor.message import JobMessage
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, outcome_keys, stored_versions, truth

NO_RECONCILER = 10.0**9  # a schedule that never fires: the test drives what runs


def quiet_stack(make_stack: MakeStack) -> LocalStack:
    """A stack with no webhook subscriptions and no reconciler runs."""
    return make_stack(StackSettings(webhooks=False, reconcile_interval=NO_RECONCILER))


def settled_jobs(
    stack: LocalStack, n: int, prefix: str, client: GeonodeClient | None = None
) -> list[str]:
    """``n`` extract jobs (submitted with ``client``) the simulator has completed."""
    client = client or stack.client()
    ids = [client.submit_extract(f"https://example.com/{prefix}{i}").job_id for i in range(n)]
    stack.run_until(
        lambda: all(j["status"] == "completed" for j in truth(stack)), step=5.0, limit=300
    )
    return ids


def enqueue(stack: LocalStack, ids: list[str]) -> None:
    """One message per extract job, sent to the stack's queue."""
    assert stack.resources is not None
    queue = BulkSender(stack.resources.queue_url, client=boto3.client("sqs"))
    queue.send_many([JobMessage(JobKey(JobKind.EXTRACT, job_id), "test") for job_id in ids])


def all_stored(stack: LocalStack, ids: list[str]) -> bool:
    """Every one of the extract jobs ``ids`` has its result in S3 (a stop predicate)."""
    seen = stored_versions(stack)
    return all(outcome_keys(j)[0] in seen for j in ids)
