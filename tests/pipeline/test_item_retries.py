"""A batch's or crawl's items that fail retryably are retried as linked extract jobs.

Judged from outside: the simulator's record (which items failed and how, which extract jobs
were posted for which URL, and how each ended) and S3's objects and versions (results, dead
letters, the manifest). The ledger is read only to know when to stop and for the counts
``status`` shows.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.processor.manifest import manifest_key
from scrape_pipeline.processor.settings import ProcessorSettings
from scrape_pipeline_local.stack import LocalStack
from tests.pipeline.conftest import MakeStack, truth, versions
from tests.pipeline.test_big_jobs import Killed, ledger, processor

BOUND = ProcessorSettings().max_resubmissions_per_url  # POSTs per retried item, at most
SIM_KIND = {"batch": "batch_item", "crawl": "crawl_page"}


def done(stack: LocalStack, key: JobKey) -> bool:
    row = ledger(stack).get(key)
    return row is not None and row.is_done


def read_json(stack: LocalStack, key: str) -> Any:
    assert stack.resources is not None
    body = boto3.client("s3").get_object(Bucket=stack.resources.bucket, Key=key)["Body"]
    return json.loads(body.read())


def check_items_retried(stack: LocalStack, kind: str, job_id: str) -> Counter[str]:
    """Every item judged from S3 and the simulator: completed ones stored once under the job;
    retryably failed ones never dead-lettered under it, each with at most ``BOUND`` extract
    jobs posted for its URL since, stored once, or dead-lettered once all of them failed;
    the manifest (written once) gives each retried item its retry's outcome and job id."""
    seen = versions(stack)
    assert max(seen.values()) == 1, [k for k, n in seen.items() if n > 1]
    items = [j for j in truth(stack, SIM_KIND[kind]) if j["job_id"] == job_id]
    extracts = truth(stack, "extract")
    manifest = read_json(stack, manifest_key(JobKind(kind), job_id))
    lines = {line["index"]: line for line in manifest["items"]}
    tally: Counter[str] = Counter()
    for item in items:
        index = int(item["index"])
        own = f"results/{kind}/{job_id}/{index:05d}/metadata.json"
        dead = f"dead-letters/{kind}/{job_id}/{index:05d}.json"
        line = lines[index]
        if item["status"] == "completed":
            assert own in seen and dead not in seen
            assert line["status"] == "stored"
            tally["stored"] += 1
            continue
        assert item["status"] == "failed" and item["retryable"], item
        assert own not in seen and dead not in seen, f"item {index} dead-lettered under the job"
        retries = [
            j for j in extracts if j["url"] == item["url"] and j["created_at"] >= item["created_at"]
        ]
        assert 1 <= len(retries) <= BOUND, (index, len(retries))
        stored = [j for j in retries if f"results/extract/{j['job_id']}/metadata.json" in seen]
        assert len(stored) <= 1, f"item {index} stored twice"
        if stored:
            assert line["status"] == "stored" and line["retry_job"] == stored[0]["job_id"]
            assert f"results/extract/{stored[0]['job_id']}/metadata.json" in line["keys"]
            tally["retried_stored"] += 1
        else:
            # Dead-lettered only after its bound: every retry failed, the last one recorded.
            assert len(retries) == BOUND and all(j["status"] == "failed" for j in retries)
            last = max(retries, key=lambda j: j["created_at"])
            assert f"dead-letters/extract/{last['job_id']}.json" in seen
            assert line["status"] == "dead_lettered" and line["retry_job"] == last["job_id"]
            tally["retried_dead_lettered"] += 1
    assert manifest["counts"]["stored"] == tally["stored"] + tally["retried_stored"]
    assert manifest["counts"]["dead_lettered"] == tally["retried_dead_lettered"]
    assert "retrying" not in {line["status"] for line in manifest["items"]}
    return tally


def posts(stack: LocalStack) -> int:
    return int(stack.sim.request_counts()["by_route"].get("POST /v1/extract", 0))


@pytest.mark.parametrize("kind", ["batch", "crawl"])
def test_retryably_failed_items_are_retried_as_linked_extract_jobs(
    make_stack: MakeStack, kind: str
):
    # GIVEN a 60-URL batch (or a 40-page crawl) whose items fail retryably at 30 %
    stack = make_stack(retryable_failure_rate=0.3, crawl_page_duration_max_s=2.0)
    client = stack.client()
    if kind == "batch":
        job_id = client.create_batch([f"https://example.com/r/{i}" for i in range(60)]).job_id
    else:
        job_id = client.create_crawl("https://example.com/crawl", max_pages=40).job_id
    key = JobKey(JobKind(kind), job_id)

    # WHEN the stack runs (webhooks, processor, reconciler) until the job is DONE
    stack.run_until(lambda: done(stack, key), step=5.0, limit=3600)

    # THEN every retryable item was retried and ended stored once, or dead-lettered after
    # its bound; the row counts what the manifest says, none retrying
    tally = check_items_retried(stack, kind, job_id)
    assert tally["retried_stored"] > 0
    row = ledger(stack).get(key)
    assert row is not None and row.outcome is Outcome.STORED
    assert (row.items_stored, row.items_failed, row.items_retrying) == (
        tally["stored"] + tally["retried_stored"],
        tally["retried_dead_lettered"],
        0,
    )
    retried = tally["retried_stored"] + tally["retried_dead_lettered"]
    assert retried <= posts(stack) <= BOUND * retried


def test_a_holder_killed_after_an_items_post_is_followed_by_one_that_adopts_its_job(
    make_stack: MakeStack,
):
    # GIVEN a 100-URL batch whose items fail retryably at 30 % (their retries never fail),
    # and a processor killed (its timeout) right after the API answered its second item POST
    stack = make_stack(item_retryable_failure_rate=0.3)
    job_processor = processor(stack)
    client = job_processor._client
    real_post = client.submit_extract
    killed: list[str] = []

    def post(url: str, **kwargs: Any) -> Any:
        submitted = real_post(url, **kwargs)
        if posts(stack) == 2 and not killed:
            killed.append(url)
            raise Killed  # the job exists; nothing noted it
        return submitted

    client.submit_extract = post  # type: ignore[method-assign]
    batch_id = stack.client().create_batch([f"https://example.com/k/{i}" for i in range(100)])
    key = JobKey(JobKind.BATCH, batch_id.job_id)

    # WHEN the stack runs until the batch is DONE
    stack.run_until(lambda: done(stack, key), step=5.0, limit=3600)

    # THEN the killed POST's job was adopted, not posted again: one extract job per retried
    # item, each stored once, and the manifest names it
    assert killed
    tally = check_items_retried(stack, "batch", key.job_id)
    failed = [j for j in truth(stack, "batch_item") if j["status"] == "failed"]
    assert tally["retried_stored"] == len(failed) == posts(stack) > 2
    assert len([j for j in truth(stack, "extract") if j["url"] == killed[0]]) == 1


def test_a_retry_whose_every_holder_dies_after_resubmitting_it_is_followed_to_its_resubmission(
    make_stack: MakeStack,
):
    # GIVEN a 60-URL batch whose items fail retryably at 30 %, their retries too, and a
    # processor killed every time it would close a row as resubmitted (after its POST): no
    # retry that failed ever says so on its row
    stack = make_stack(retryable_failure_rate=0.3)
    job_processor = processor(stack)
    the_ledger = job_processor._ledger
    real_finish = the_ledger.finish
    kills: list[str] = []

    def finish(key: JobKey, owner: str, outcome: Outcome, *args: Any, **kwargs: Any) -> Any:
        if outcome is Outcome.RESUBMITTED:
            kills.append(key.job_id)
            raise Killed
        return real_finish(key, owner, outcome, *args, **kwargs)

    the_ledger.finish = finish  # type: ignore[method-assign]
    batch = stack.client().create_batch([f"https://example.com/d/{i}" for i in range(60)])
    key = JobKey(JobKind.BATCH, batch.job_id)

    # WHEN the stack runs until the batch is DONE
    stack.run_until(lambda: done(stack, key), step=5.0, limit=3600)

    # THEN a retry resubmitted was followed on to its resubmission: every item stored once
    # or dead-lettered after its bound, as the manifest says
    retried_items = {f"{j['url']}" for j in truth(stack, "batch_item") if j["status"] == "failed"}
    resubmitted = [j for j in truth(stack, "extract") if j["job_id"] in kills]
    assert any(j["url"] in retried_items for j in resubmitted), "no item's retry was resubmitted"
    tally = check_items_retried(stack, "batch", key.job_id)
    assert tally["retried_stored"] > 0
