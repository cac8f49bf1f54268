"""Issue 35 item 1, the processor's side: a resubmission's or an item retry's POST whose answer
is lost while the API lists jobs 240-265 s late (the ``listing-lag`` chaos profile) is never
posted again. Judged by the simulator's record of POSTs per URL and of the jobs it made."""

from __future__ import annotations

from collections import Counter

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline_local.chaos import PROFILES
from scrape_pipeline_local.stack import StackSettings
from tests.pipeline.conftest import MakeStack, truth
from tests.pipeline.direct import NO_RECONCILER, enqueue
from tests.pipeline.test_big_jobs import ledger

LAG = PROFILES["listing-lag"].listing_lag
assert LAG is not None
LISTED_LAG = {"listing_lag_min_s": LAG[0], "listing_lag_max_s": LAG[1]}
POST_JOB = "POST /v1/extract"


def test_a_resubmission_whose_answer_was_lost_is_adopted_never_posted_again(
    make_stack: MakeStack,
):
    # GIVEN three jobs that fail retryably, one resubmission each allowed, an API that lists
    # jobs 240-265 s late, and every resubmission POST's answer lost (a 504) after the job is
    # made; only the test's messages run (no webhook, no reconciler)
    stack = make_stack(
        StackSettings(
            webhooks=False,
            reconcile_interval=NO_RECONCILER,
            env={"MAX_RESUBMISSIONS_PER_URL": "1"},
        ),
        retryable_failure_rate=1.0,
        **LISTED_LAG,
    )
    urls = [f"https://example.com/resub-lag/{i}" for i in range(3)]
    client = stack.client()
    ids = [client.submit_extract(url).job_id for url in urls]
    stack.run_until(lambda: all(j["status"] == "failed" for j in truth(stack)), step=5.0)
    stack.sim.faults.lose_answers(POST_JOB, [504] * len(urls))
    # WHEN the failed jobs' messages are processed until each is closed
    enqueue(stack, ids)
    keys = [JobKey(JobKind.EXTRACT, job_id) for job_id in ids]
    stack.run_until(
        lambda: all((row := ledger(stack).get(k)) is not None and row.is_done for k in keys),
        step=5.0,
        limit=1800,
    )
    # THEN each URL was created twice: its job and one resubmission, never a third POST
    assert stack.sim.submissions() == dict.fromkeys(urls, 2)
    # AND each failed job was closed as resubmitted by the job its lost POST made (adopted)
    made = {j["job_id"] for j in truth(stack)} - set(ids)
    for key in keys:
        row = ledger(stack).get(key)
        assert row is not None and row.outcome is Outcome.RESUBMITTED
        assert row.detail["resubmitted_as"] in made and row.detail["adopted"] == "true"


def test_an_item_retry_whose_answer_was_lost_is_adopted_never_posted_again(
    make_stack: MakeStack,
):
    # GIVEN a 30-URL batch whose items fail retryably at 30 % (their retries never fail), an
    # API that lists jobs 240-265 s late, and the first two item retry POSTs' answers lost
    stack = make_stack(item_retryable_failure_rate=0.3, **LISTED_LAG)
    urls = [f"https://example.com/item-lag/{i}" for i in range(30)]
    stack.sim.faults.lose_answers(POST_JOB, [504, 504])
    batch = stack.client().create_batch(urls).job_id
    key = JobKey(JobKind.BATCH, batch)
    # WHEN the stack runs (webhooks, processor, reconciler) until the batch is DONE
    stack.run_until(
        lambda: (row := ledger(stack).get(key)) is not None and row.is_done,
        step=5.0,
        limit=3600,
    )
    # THEN every retried item's URL was posted as an extract job exactly once
    failed = [j["url"] for j in truth(stack, "batch_item") if j["status"] == "failed"]
    per_url = Counter(j["url"] for j in truth(stack, "extract"))
    assert len(failed) >= 2 and stack.sim.faults.lost_answer(POST_JOB) is None
    assert {url: per_url[url] for url in failed} == dict.fromkeys(failed, 1)
    assert set(per_url) == set(failed)
