"""The chaos judge of retried items: each retryable item ends stored once, or dead-lettered by
its retry, judged per URL from the simulator's rows and the bucket's live keys."""

from __future__ import annotations

from typing import Any

from scrape_pipeline_local.item_retries_judge import judge_item_retries
from scrape_pipeline_local.judge import Listing

BOUND = 2


def item(index: int, url: str, *, job_id: str = "b1") -> dict[str, Any]:
    return {
        "kind": "batch_item",
        "job_id": job_id,
        "index": index,
        "url": url,
        "status": "failed",
        "retryable": True,
        "created_at": 10.0,
    }


def retry(job_id: str, url: str, *, at: float = 20.0, status: str = "completed") -> dict[str, Any]:
    return {
        "kind": "extract",
        "job_id": job_id,
        "url": url,
        "status": status,
        "retryable": status == "failed",
        "created_at": at,
    }


def stored(job_id: str) -> str:
    return f"results/extract/{job_id}/metadata.json"


def judged(rows: list[dict[str, Any]], live: set[str]) -> Any:
    gets = {str(r["job_id"]): {"GET /v1/extract/{job_id}": 1} for r in rows}
    return judge_item_retries(rows, Listing(live=live), gets_by_job=gets, bound=BOUND)


def test_two_items_of_one_url_each_stored_by_a_retry_are_stored_once_each():
    rows = [item(0, "u"), item(1, "u"), retry("r1", "u"), retry("r2", "u")]
    found = judged(rows, {stored("r1"), stored("r2")})
    assert (found.retryable, found.stored, found.stored_twice, found.unresolved) == (2, 2, 0, 0)
    assert (found.posts, found.posts_max, found.gets) == (2, 1, 2)
    assert found.requests_per_item == 2.0
    assert found.rows()[1] == ("ITEMS NOT RETRIED, UNRESOLVED OR STORED TWICE", "0")


def test_an_item_stored_by_two_retries_is_stored_twice():
    found = judged([item(0, "u"), retry("r1", "u"), retry("r2", "u")], {stored("r1"), stored("r2")})
    assert (found.stored, found.stored_twice) == (1, 1)


def test_an_item_dead_lettered_under_its_batch_was_not_retried():
    found = judged([item(0, "u")], {"dead-letters/batch/b1/00000.json"})
    assert (found.left_dead_lettered, found.unresolved, found.mishandled) == (1, 1, 2)


def test_a_retry_failing_retryably_is_dead_lettered_only_once_the_bound_is_spent():
    first, last = retry("r1", "u", status="failed"), retry("r2", "u", at=30.0, status="failed")
    record = "dead-letters/extract/r2.json"
    assert judged([item(0, "u"), first, last], {record}).dead_lettered == 1
    early = judged(
        [item(0, "u"), retry("r1", "u", status="failed")], {"dead-letters/extract/r1.json"}
    )
    assert (early.dead_lettered, early.unresolved) == (0, 1)


def test_an_extract_job_of_the_url_older_than_the_item_is_not_its_retry():
    found = judged([item(0, "u"), retry("old", "u", at=5.0)], {stored("old")})
    assert (found.posts, found.stored, found.unresolved) == (0, 0, 1)
