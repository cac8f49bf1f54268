"""The issue's case: a batch with 10 % retryable item failures (and 10 % of extract jobs,
retries included, failing retryably), judged from the simulator's record and S3. ``make test``
runs 200 URLs (about 20 items retried: each bound and count is per item, the same at any size);
``-m slow`` the issue's 1,000."""

from __future__ import annotations

import pytest

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from tests.pipeline.conftest import MakeStack, truth
from tests.pipeline.test_big_jobs import ledger
from tests.pipeline.test_item_retries import BOUND, check_items_retried, done, posts

# What a retried item may cost the API besides its batch's pages: its POSTs and one GET of
# each job when it settles (a 404 while the job is new, or a 429, may add one).
EXTRACT_GET = "GET /v1/extract/{job_id}"


@pytest.mark.parametrize(
    "urls", [pytest.param(200, id="200"), pytest.param(1000, id="1000", marks=pytest.mark.slow)]
)
def test_a_batch_ends_with_every_retryable_item_stored_once_or_past_its_bound(
    make_stack: MakeStack, urls: int
):
    # GIVEN a batch whose items fail retryably at 10 %, and extract jobs at 10 %
    stack = make_stack(item_retryable_failure_rate=0.1, retryable_failure_rate=0.1)
    batch = stack.client().create_batch([f"https://example.com/t/{i}" for i in range(urls)])
    key = JobKey(JobKind.BATCH, batch.job_id)

    # WHEN the stack runs until the batch is DONE
    stack.run_until(lambda: done(stack, key), step=10.0, limit=4 * 3600)

    # THEN each retryable item was stored once, or dead-lettered once its bound was spent;
    # no URL was posted more than its bound, and the row counts what the manifest says
    tally = check_items_retried(stack, "batch", batch.job_id)
    failed = [j for j in truth(stack, "batch_item") if j["status"] == "failed"]
    retried = tally["retried_stored"] + tally["retried_dead_lettered"]
    assert retried == len(failed) >= urls // 20
    assert tally["stored"] + retried == urls
    row = ledger(stack).get(key)
    assert row is not None and row.outcome is Outcome.STORED
    assert (row.items_stored, row.items_failed, row.items_retrying) == (
        tally["stored"] + tally["retried_stored"],
        tally["retried_dead_lettered"],
        0,
    )
    post_count = posts(stack)
    extract_gets = int(stack.sim.request_counts()["by_route"].get(EXTRACT_GET, 0))
    assert retried <= post_count <= BOUND * retried
    assert extract_gets <= 2 * post_count
    print(
        f"retried={retried} stored={tally['retried_stored']} "
        f"dead_lettered={tally['retried_dead_lettered']} posts={post_count} "
        f"extract_gets={extract_gets} requests/item={(post_count + extract_gets) / retried:.2f}"
    )
