"""Jobs, batches and crawls that run for a day or more, judged from outside (simulator, S3).

A job that outlives every short retry must still be stored once when it settles, whether or
not its webhook comes, and watching it must not cost a Geonode call per job per poll. A job
closed as "unknown" or "never settled" that settles after all is reopened and stored once.
"""

from __future__ import annotations

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, outcome_keys, truth, versions

DAY = 86_400.0
# Longer than the old 24 h "unsettled" bound, so the old code lost these jobs.
LONG = {"long_job_rate": 1.0, "long_job_min_s": DAY + 3600.0, "long_job_max_s": DAY + 5400.0}
# The reconciler every 20 minutes (a rate the ReconcileSchedule parameter accepts), one step
# per run: at the template's rate(1 minute) a simulated day is 1,440 runs of some 20 moto and
# simulator round trips each, minutes of real time. What these tests judge does not follow the
# rate: list reads are bounded per run, batch polls per hour of the batch's age, and a watch
# that polled every job on every run would still break each bound several times over.
SCHEDULE = 1200.0
STEP = SCHEDULE
GET_JOB = "GET /v1/extract/{job_id}"
LIST_JOBS = "GET /v1/extract/jobs"
GET_BATCH = "GET /v1/batch/{batch_id}"


def routes(stack: LocalStack) -> dict[str, int]:
    counts: dict[str, int] = stack.sim.request_counts()["by_route"]
    return counts


def live_keys(stack: LocalStack) -> set[str]:
    """Keys whose latest version is an object (not a delete marker)."""
    assert stack.resources is not None
    s3 = boto3.client("s3")
    live: set[str] = set()
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=stack.resources.bucket):
        live.update(v["Key"] for v in page.get("Versions", []) if v["IsLatest"])
    return live


def ledger(stack: LocalStack) -> Ledger:
    assert stack.resources is not None
    return Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)


def test_long_running_extract_jobs_without_webhooks_stored_when_they_settle(
    make_stack: MakeStack,
):
    # GIVEN three extract jobs running for more than a day, every webhook lost
    stack = make_stack(StackSettings(reconcile_interval=SCHEDULE), **LONG)
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    ids = [client.submit_extract(f"https://example.com/long{i}").job_id for i in range(3)]
    settle = max(float(j["settled_at"]) for j in truth(stack))

    # WHEN the pipeline runs until an hour after the last one settled
    stack.run_until(lambda: stack.clock.time() > settle + 3600, step=STEP, limit=2 * DAY)

    # THEN each is stored once, and watching them for a day cost no GET of their own: the
    # reconciler's list reads (a page or two a run, shared by every watched job) found them
    seen = versions(stack)
    assert all(outcome_keys(job_id)[0] in seen for job_id in ids)
    assert max(seen.values()) == 1 and not [k for k in seen if k.startswith("dead-letters/")]
    assert routes(stack)[GET_JOB] <= 3 * 2, routes(stack)
    assert stack.schedule is not None
    runs = len(stack.schedule.runs)
    # (a run: the watch's two listings, the job list's page, and its count check's two counts)
    assert routes(stack)[LIST_JOBS] <= 6 * runs, (routes(stack)[LIST_JOBS], runs)


def test_long_running_batch_without_webhook_polled_hourly_and_stored(make_stack: MakeStack):
    # GIVEN an announced batch whose items run for more than a day, its webhook lost
    stack = make_stack(StackSettings(reconcile_interval=SCHEDULE), **LONG)
    stack.sim.faults.update(drop_rate=1.0)
    urls = [f"https://example.com/long-batch/{i}" for i in range(3)]
    batch_id = stack.client().create_batch(urls).job_id
    from scrape_pipeline_ops.submissions import expect

    expect(ledger(stack), JobKind.BATCH, batch_id)
    settle = max(float(j["settled_at"]) for j in truth(stack, "batch_item"))

    # WHEN the pipeline runs until two hours after it settled
    stack.run_until(lambda: stack.clock.time() > settle + 7200, step=STEP, limit=2 * DAY)

    # THEN every item is stored once, nothing dead-lettered, at about one GET an hour
    seen = versions(stack)
    manifest = f"results/batch/{batch_id}/manifest.json"
    stored = [k for k in seen if k.startswith(f"results/batch/{batch_id}/") and k != manifest]
    assert len(stored) == 2 * len(urls), stored  # content and metadata of each item
    assert manifest in seen  # written last, once every item was stored
    assert max(seen.values()) == 1 and not [k for k in seen if k.startswith("dead-letters/")]
    hours = (stack.clock.time() - float(truth(stack, "batch_item")[0]["created_at"])) / 3600
    assert routes(stack)[GET_BATCH] <= hours + 12, (routes(stack)[GET_BATCH], hours)


@pytest.mark.parametrize("evidence", ["webhook", "job_list"])
def test_long_running_job_closed_as_unknown_reopened_when_it_settles(
    make_stack: MakeStack, evidence: str
):
    # GIVEN jobs that take ten minutes, an early notification for each (the processor looks
    # before the API knows them: 404 for five minutes), dead-lettered as unknown after three
    # 404s; their webhooks arrive, or are all lost and only the job list shows them settled
    stack = make_stack(
        # The API lists a job as late as it answers its GET (300 s here): the job list's
        # overlap must cover that lag, or no pass sees the job (docs/configuration.md).
        StackSettings(env={"NOT_FOUND_MAX_TRIES": "3", "RECONCILE_OVERLAP_SECONDS": "400"}),
        job_duration_min_s=600,
        job_duration_max_s=700,
        not_found_lag_s=300,
    )
    if evidence == "job_list":
        stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    ids = [client.submit_extract(f"https://example.com/lagging{i}").job_id for i in range(3)]
    assert stack.resources is not None
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    for job_id in ids:
        queue.send(JobMessage(JobKey(JobKind.EXTRACT, job_id), "early"))

    def all_dead() -> bool:
        seen = versions(stack)
        return all(outcome_keys(job_id)[1] in seen for job_id in ids)

    stack.run_until(all_dead, step=5.0, limit=600)
    assert not [j for j in truth(stack) if j["status"] == "completed"]  # closed while running

    # WHEN they complete
    stack.run_until(
        lambda: all(outcome_keys(j)[0] in versions(stack) for j in ids), step=10.0, limit=3600
    )

    # THEN each is stored once and its dead-letter record retired: one live outcome per job
    live = live_keys(stack)
    seen = versions(stack)
    for job_id in ids:
        result, dead = outcome_keys(job_id)
        assert result in live and dead not in live
        assert seen[result] == 1 and seen[dead] == 1  # the record is kept as history


def test_long_running_job_closed_as_never_settled_reopened_by_its_webhook(
    make_stack: MakeStack,
):
    # GIVEN a running job whose row an earlier version closed as "never settled"
    stack = make_stack(job_duration_min_s=600, job_duration_max_s=700)
    job_id = stack.client().submit_extract("https://example.com/slow").job_id
    books = ledger(stack)
    key = JobKey(JobKind.EXTRACT, job_id)
    stack.step(1.0)
    assert books.acquire(key, "old-version", 60, source="test").granted
    books.finish(key, "old-version", Outcome.DEAD_LETTERED, {"reason": "never settled"})

    # WHEN it completes and its webhook arrives
    stack.run_until(lambda: outcome_keys(job_id)[0] in versions(stack), step=5.0, limit=1800)

    # THEN it is stored once
    row = books.get(key)
    assert row is not None and row.outcome is Outcome.STORED
    assert versions(stack)[outcome_keys(job_id)[0]] == 1
    accepted = [a for a in stack.sim.delivery_attempts() if a["job_id"] == job_id]
    assert accepted and accepted[0]["http_status"] == 200
