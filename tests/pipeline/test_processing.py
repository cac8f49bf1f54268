"""The processor's outcomes end to end: resubmission, dead letters, batches and crawls."""

from __future__ import annotations

import json
from typing import Any

import boto3

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import (
    MakeStack,
    all_settled_and_done,
    check_exactly_once,
    stored_versions,
    truth,
    versions,
)


def settled_chain(stack: LocalStack, url: str) -> list[dict[str, Any]]:
    return [j for j in truth(stack) if j["url"] == url]


def test_processing_retryable_failures_resubmitted_within_url_budget(make_stack: MakeStack):
    # GIVEN every extraction fails retryably and a budget of 2 resubmissions per URL
    stack = make_stack(
        StackSettings(env={"MAX_RESUBMISSIONS_PER_URL": "2"}), retryable_failure_rate=1.0
    )
    client = stack.client()
    for i in range(3):
        client.submit_extract(f"https://example.com/r{i}")

    def chains_finished() -> bool:
        subs = stack.sim.submissions()
        urls = [f"https://example.com/r{i}" for i in range(3)]
        return all(subs.get(u) == 3 and _chain_done(stack, u) for u in urls)

    stack.run_until(chains_finished, step=2.0, limit=900)
    # THEN each URL was submitted 1 + 2 times, and only the last of each chain is dead-lettered
    assert stack.sim.submissions() == {f"https://example.com/r{i}": 3 for i in range(3)}
    tally = check_exactly_once(stack)
    assert tally == {"resubmitted": 6, "dead_lettered": 3}


def test_processing_crash_after_resubmission_post_posts_nothing_twice(make_stack: MakeStack):
    # GIVEN a processor that dies right after its resubmission POST, before recording it
    stack = make_stack(
        StackSettings(env={"MAX_RESUBMISSIONS_PER_URL": "3"}), retryable_failure_rate=1.0
    )
    job_processor = stack.handlers["processor"].get_processor()[0]
    real_finish = job_processor._ledger.finish
    crashed: list[str] = []

    def finish(key: JobKey, owner: str, outcome: Outcome, detail: Any = None, **kwargs: Any) -> Any:
        if outcome is Outcome.RESUBMITTED and not crashed:
            crashed.append(key.job_id)
            raise RuntimeError("killed between the POST and the ledger write")
        return real_finish(key, owner, outcome, detail, **kwargs)

    job_processor._ledger.finish = finish
    url = "https://example.com/crash"
    stack.client().submit_extract(url)
    stack.run_until(
        lambda: stack.sim.submissions().get(url) == 4 and _chain_done(stack, url),
        step=5.0,
        limit=3000,
    )
    # THEN the retry adopted the job the dead holder had posted: 1 + 3 submissions, not more
    assert crashed
    assert stack.sim.submissions()[url] == 4
    for _ in range(60):  # and nothing more happens later
        stack.step(30.0)
    assert stack.sim.submissions()[url] == 4
    assert check_exactly_once(stack) == {"resubmitted": 3, "dead_lettered": 1}


def _chain_done(stack: LocalStack, url: str) -> bool:
    chain = sorted(settled_chain(stack, url), key=lambda j: j["created_at"])
    return bool(chain) and (
        f"dead-letters/extract/{chain[-1]['job_id']}.json" in stored_versions(stack)
    )


def test_processing_permanent_failure_dead_lettered_with_reason(make_stack: MakeStack):
    stack = make_stack(permanent_failure_rate=1.0)
    job_id = stack.client().submit_extract("https://example.com/blocked").job_id
    stack.run_until(all_settled_and_done(stack, 1), step=1.0, limit=300)
    assert check_exactly_once(stack) == {"dead_lettered": 1}
    assert stack.resources is not None
    record = json.loads(
        boto3.client("s3")
        .get_object(Bucket=stack.resources.bucket, Key=f"dead-letters/extract/{job_id}.json")[
            "Body"
        ]
        .read()
    )
    assert record["reason"] == "not retryable" and record["code"] == "TARGET_BLOCKED"
    assert stack.sim.submissions()["https://example.com/blocked"] == 1


def _items_done(stack: LocalStack, kind: str, job_id: str, count: int) -> bool:
    seen = stored_versions(stack)
    prefix = f"results/{kind}/{job_id}/"
    return sum(1 for k in seen if k.startswith(prefix) and k.endswith("metadata.json")) == count


def test_processing_batch_items_stored_once_each(make_stack: MakeStack):
    stack = make_stack()
    urls = [f"https://example.com/batch/{i}" for i in range(7)]
    batch_id = stack.client().create_batch(urls).job_id
    stack.run_until(lambda: _items_done(stack, "batch", batch_id, 7), step=1.0, limit=300)
    for _ in range(5):
        stack.step(10.0)
    seen = versions(stack)
    assert max(seen.values()) == 1
    # md + meta for each item, and the batch's manifest
    assert sum(1 for k in seen if k.startswith(f"results/batch/{batch_id}/")) == 15
    assert f"results/batch/{batch_id}/manifest.json" in seen


def test_processing_crawl_pages_stored_once_each(make_stack: MakeStack):
    stack = make_stack()
    crawl_id = stack.client().create_crawl("https://example.com/site", max_pages=5).job_id
    stack.run_until(lambda: _items_done(stack, "crawl", crawl_id, 5), step=1.0, limit=300)
    for _ in range(5):
        stack.step(10.0)
    assert max(versions(stack).values()) == 1


def test_processing_cancelled_crawl_recorded_with_its_finished_pages(make_stack: MakeStack):
    stack = make_stack(crawl_page_duration_min_s=5, crawl_page_duration_max_s=6)
    client = stack.client()
    crawl_id = client.create_crawl("https://example.com/big", max_pages=40).job_id
    stack.step(7.0)
    client.cancel_crawl(crawl_id)
    assert stack.resources is not None
    from scrape_pipeline.ledger.full import Ledger

    ledger = Ledger(stack.resources.table, client=boto3.client("dynamodb"))

    def cancelled() -> bool:
        row = ledger.get(JobKey(JobKind.CRAWL, crawl_id))
        return row is not None and row.outcome is Outcome.CANCELLED

    stack.run_until(cancelled, step=1.0, limit=300)
    completed = [p for p in stack.sim.truth_jobs("crawl_page") if p["final_status"] == "completed"]
    assert _items_done(stack, "crawl", crawl_id, len(completed))
    assert max(versions(stack).values()) == 1
