"""An item's retry POST the API refused (429: it certainly did nothing) is given back: posted
again later, and no URL ends with two extract jobs."""

from __future__ import annotations

from collections import Counter

from scrape_pipeline.jobs import JobKey, JobKind
from tests.pipeline.conftest import MakeStack, truth
from tests.pipeline.test_item_retries import check_items_retried, done

THROTTLED_S = 900.0


def test_item_retry_posts_answered_429_are_posted_later_once_each(make_stack: MakeStack):
    # GIVEN a 60-URL batch whose items fail retryably at 30 %, and every POST /v1/extract
    # answered 429 for the first 15 minutes
    stack = make_stack(item_retryable_failure_rate=0.3)
    stack.sim.faults.burst(duration_s=THROTTLED_S, status=429, route="POST /v1/extract")
    batch = stack.client().create_batch([f"https://example.com/q/{i}" for i in range(60)])
    key = JobKey(JobKind.BATCH, batch.job_id)

    # WHEN the stack runs until the batch is DONE
    took = stack.run_until(lambda: done(stack, key), step=15.0, limit=4 * 3600)

    # THEN the POSTs were refused at first, and yet each failed item's URL has one extract
    # job, posted after the throttle, stored once and named by the manifest
    by_status = stack.sim.request_counts()["by_status"]
    assert int(by_status.get("429", 0)) > 0
    assert took > THROTTLED_S
    failed = [j for j in truth(stack, "batch_item") if j["status"] == "failed"]
    per_url = Counter(j["url"] for j in truth(stack, "extract"))
    assert failed and all(per_url[j["url"]] == 1 for j in failed), per_url
    assert check_items_retried(stack, "batch", batch.job_id)["retried_stored"] == len(failed)
