"""Large deliveries: multi-MB pages reach S3 exact, by the webhook or, over the limit, the log.

extract_completed carries the page, so a large page is a large delivery. Under the platform's
limit it goes the webhook's way; over it the sender sees 413, its delivery log says so, and
the reconciler's delivery-log sweep recovers the job. Judged from outside: the simulator's
record and delivery log, and the objects in S3.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from scrape_pipeline.receiver.webhook import PLATFORM_MAX_BODY_BYTES
from scrape_pipeline_local.simulator import content
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, all_settled_and_done, check_exactly_once, truth
from tests.pipeline.test_failure_table import recovered

MB = 1_000_000
# Every page drawn at exactly this size: sigma 0 makes the log-normal a point.
FIXED_SIZE: dict[str, Any] = {"content_size": "lognormal", "content_size_sigma": 0.0}
# Stands for the front's limit (API Gateway / Lambda) at a size a test moves quickly.
FRONT_LIMIT_BYTES = 1 * MB


def stored_markdown(stack: LocalStack, job_id: str) -> bytes:
    """The page as the processor stored it in S3."""
    assert stack.resources is not None
    key = f"results/extract/{job_id}/content.md"
    return bytes(
        boto3.client("s3").get_object(Bucket=stack.resources.bucket, Key=key)["Body"].read()
    )


def true_markdown(job: dict[str, Any]) -> bytes:
    """The page the simulator served for ``job``: its URL at its drawn size."""
    return str(
        content.extract(job["url"], ("markdown",), job["content_bytes"])["markdown"]
    ).encode()


def test_large_page_under_the_limit_is_stored_exact_through_the_webhook(make_stack: MakeStack):
    # GIVEN a 4 MB page: its delivery is large, yet under the receiver's default limit
    stack = make_stack(**FIXED_SIZE, content_size_median_bytes=4 * MB)
    job_id = stack.client().submit_extract("https://example.com/large").job_id
    # WHEN the pipeline runs
    stack.run_until(all_settled_and_done(stack, 1), step=5.0, limit=600)
    # THEN the webhook carried it: one attempt, answered 200, of more than 4 MB
    (attempt,) = stack.sim.delivery_attempts()
    assert (attempt["job_id"], attempt["http_status"]) == (job_id, 200)
    assert 4 * MB < attempt["body_bytes"] <= PLATFORM_MAX_BODY_BYTES
    assert sum(recovered(stack).values()) == 0
    # AND S3 holds the page byte for byte, written once
    assert check_exactly_once(stack) == {"stored": 1}
    (job,) = truth(stack)
    assert job["content_bytes"] == 4 * MB
    assert stored_markdown(stack, job_id) == true_markdown(job)


@pytest.mark.parametrize(
    ("limit", "page"),
    [
        (FRONT_LIMIT_BYTES, 2 * MB),  # a front limit a test moves quickly
        (None, 5 * MB),  # the default: more than a REST API + Lambda event can carry
    ],
    ids=["front-1MB", "default-limit"],
)
def test_delivery_over_the_limit_is_413_and_recovered_from_the_delivery_log(
    make_stack: MakeStack, limit: int | None, page: int
):
    # GIVEN a page larger than what the front carries
    env = {} if limit is None else {"MAX_BODY_BYTES": str(limit)}
    stack = make_stack(StackSettings(env=env), **FIXED_SIZE, content_size_median_bytes=page)
    job_id = stack.client().submit_extract("https://example.com/too-large").job_id
    # WHEN the pipeline runs
    took = stack.run_until(all_settled_and_done(stack, 1), step=5.0, limit=1800)
    # THEN every attempt was answered 413, and the sender's log shows them failed with 413
    attempts = stack.sim.delivery_attempts()
    assert attempts and {a["http_status"] for a in attempts} == {413}
    assert min(a["body_bytes"] for a in attempts) > (limit or PLATFORM_MAX_BODY_BYTES)
    log = stack.client().list_deliveries(stack.webhook_ids["extract_completed"], status="failed")
    assert {(d.job_id, d.http_status) for d in log.items} == {(job_id, 413)}
    # AND the reconciler's next run found it in the log, not in the job list
    assert recovered(stack)["delivery_log"] == 1
    assert recovered(stack)["job_list"] == 0
    assert stack.schedule is not None
    assert took <= stack.schedule.interval + 60, took  # one run, not a retry schedule
    # AND S3 holds the whole page, written once
    assert check_exactly_once(stack) == {"stored": 1}
    (job,) = truth(stack)
    assert stored_markdown(stack, job_id) == true_markdown(job)
    assert len(true_markdown(job)) == page
