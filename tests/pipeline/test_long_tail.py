"""The long tail on the local stack: poison jobs, throttled resubmissions, brief 404s, S3 409s.

Each test is judged from outside: the simulator's record (jobs, submissions, request counts)
and the results bucket (objects and their versions), never the ledger's word.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse, HTTPHeaders

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import (
    MakeStack,
    all_settled_and_done,
    check_exactly_once,
    outcome_keys,
    truth,
    versions,
)

GET_JOB = "GET /v1/extract/{job_id}"
POST_JOB = "POST /v1/extract"
TWO_HOURS = 7200.0
NO_RECONCILER = 10.0**9  # a schedule that never fires: the test drives what runs


def submit(stack: LocalStack, n: int, prefix: str) -> list[str]:
    client = stack.client()
    return [client.submit_extract(f"https://example.com/{prefix}{i}").job_id for i in range(n)]


def s3_json(stack: LocalStack, key: str) -> dict[str, Any]:
    assert stack.resources is not None
    body = boto3.client("s3").get_object(Bucket=stack.resources.bucket, Key=key)["Body"].read()
    parsed: dict[str, Any] = json.loads(body)
    return parsed


def routes(stack: LocalStack) -> dict[str, int]:
    counts: dict[str, int] = stack.sim.request_counts()["by_route"]
    return counts


# -- poison jobs: the same failure on every attempt ----------------------------------------------


def test_long_tail_poison_jobs_dead_lettered_with_last_error_and_bounded_calls(
    make_stack: MakeStack,
):
    # GIVEN four jobs whose every GET answers 200 with a body missing job_id, two healthy ones
    stack = make_stack()
    poison = submit(stack, 4, "poison")
    for job_id in poison:
        stack.sim.faults.malform(job_id)
    healthy = submit(stack, 2, "healthy")

    # WHEN two simulated hours pass (twelve reconciler runs)
    for _ in range(int(TWO_HOURS / 30)):
        stack.step(30.0)

    # THEN each poison job has one dead-letter record naming its last error, the healthy ones
    # are stored, nothing is written twice, and the poison jobs cost a bounded number of GETs
    seen = versions(stack)
    assert max(seen.values()) == 1
    for job_id in poison:
        result, dead = outcome_keys(job_id)
        assert result not in seen and dead in seen
        record = s3_json(stack, dead)
        assert record["reason"] == "failed on every attempt"
        assert "job_id" in record["last_error"] and int(record["attempts"]) == 8
    for job_id in healthy:
        assert outcome_keys(job_id)[0] in seen
    gets_per_healthy_job = 1
    poison_gets = routes(stack)[GET_JOB] - gets_per_healthy_job * len(healthy)
    assert poison_gets <= 10 * len(poison), poison_gets
    # and nothing more happens to them afterwards
    before = routes(stack)[GET_JOB]
    for _ in range(40):
        stack.step(60.0)
    assert routes(stack)[GET_JOB] == before


# -- throttled resubmission: a 429 on the POST spends nothing ------------------------------------


def test_long_tail_throttled_resubmission_posts_later_within_budget(make_stack: MakeStack):
    # GIVEN jobs that fail retryably, a budget of one resubmission per URL, and an API that
    # answers the first resubmission POSTs of each with 429
    stack = make_stack(
        StackSettings(env={"MAX_RESUBMISSIONS_PER_URL": "1"}), retryable_failure_rate=1.0
    )
    urls = [f"https://example.com/throttled{i}" for i in range(3)]
    client = stack.client()
    for url in urls:
        client.submit_extract(url)
    # every resubmission POST throttled twice (the submissions above went through)
    stack.sim.faults.burst(count=6, status=429, route=POST_JOB)

    # WHEN the pipeline runs on
    stack.run_until(lambda: stack.sim.submissions() == dict.fromkeys(urls, 2), step=5.0, limit=3600)
    for _ in range(60):
        stack.step(30.0)

    # THEN each failed job was resubmitted exactly once (the throttles spent no budget), and
    # the resubmitted jobs (failing again) are dead-lettered as over budget, not the originals
    assert stack.sim.submissions() == dict.fromkeys(urls, 2)
    seen = versions(stack)
    for url in urls:
        first, second = sorted(
            (j for j in truth(stack) if j["url"] == url), key=lambda j: j["created_at"]
        )
        assert outcome_keys(first["job_id"])[1] not in seen  # resubmitted, not dead-lettered
        dead = outcome_keys(second["job_id"])[1]
        assert s3_json(stack, dead)["reason"] == "resubmission budget spent"


# -- 404 bound: only 404s count ------------------------------------------------------------------


def test_long_tail_throttles_do_not_count_toward_unknown_job(make_stack: MakeStack):
    # GIVEN jobs the API keeps answering 429 for ten minutes after they settle, and then
    # 404 for a while (replica lag of 700 s); NOT_FOUND_MAX_TRIES is 6 by default
    stack = make_stack(job_duration_min_s=60, job_duration_max_s=90, not_found_lag_s=700)
    ids = submit(stack, 5, "lag")
    stack.sim.faults.burst(duration_s=600.0, status=429, route=GET_JOB)

    # WHEN everything settles
    stack.run_until(all_settled_and_done(stack, 5), step=5.0, limit=3600)

    # THEN every job is stored, none dead-lettered as unknown: the throttles were not 404s
    assert check_exactly_once(stack) == {"stored": 5}
    assert all(outcome_keys(job_id)[0] in versions(stack) for job_id in ids)
    assert stack.clock.sleeps == []  # nobody slept: messages came back on SQS's clock


# -- S3 409: a conditional write conflict is not "already there" ---------------------------------


def test_long_tail_s3_conflict_is_retried_not_taken_for_stored(make_stack: MakeStack):
    # GIVEN S3 answering 409 ConditionalRequestConflict to the first write of each content file
    stack = make_stack()
    processor = stack.handlers["processor"].get_processor()[0]
    s3 = processor._results._s3
    conflicted: set[str] = set()

    def conflict_once(params: dict[str, Any], **_: Any) -> Any:
        key = params["url_path"].rsplit("/", 1)[-1]
        if key == "content.md" and params["url_path"] not in conflicted:
            conflicted.add(params["url_path"])
            response = AWSResponse(params["url"], 409, HTTPHeaders(), None)
            error = {
                "Error": {"Code": "ConditionalRequestConflict", "Message": "in flight"},
                "ResponseMetadata": {"HTTPStatusCode": 409},
            }
            return response, error
        return None

    s3.meta.events.register("before-call.s3.PutObject", conflict_once)
    ids = submit(stack, 4, "conflict")

    # WHEN the jobs are processed
    stack.run_until(all_settled_and_done(stack, 4), step=2.0, limit=600)

    # THEN each job's content is in S3 (written once), not just its metadata
    assert len(conflicted) == 4
    seen = versions(stack)
    assert max(seen.values()) == 1
    assert stack.resources is not None
    for job_id in ids:
        content = f"results/extract/{job_id}/content.md"
        assert content in seen, f"{content} missing: the 409 was taken for 'already there'"
        body = boto3.client("s3").get_object(Bucket=stack.resources.bucket, Key=content)
        assert body["Body"].read()


# -- timeouts: a batch larger than one invocation ------------------------------------------------

BIG_BATCH = 1000
PAGE = 50  # the processor reads batches 50 items a page
GET_BATCH = "GET /v1/batch/{batch_id}"


def test_long_tail_big_batch_stored_across_invocations_page_by_page(make_stack: MakeStack):
    # GIVEN a 1,000-item batch and a processor that times out after 4 s of wall time (storing
    # all of it takes several times that on moto), stopping 1 s before its deadline
    stack = make_stack(
        StackSettings(processor_timeout=4.0, env={"STOP_MARGIN_SECONDS": "1"}),
        job_duration_min_s=1,
        job_duration_max_s=2,
    )
    processor = stack.handlers["processor"].get_processor()[0]
    process = processor.process
    outcomes: Counter[str] = Counter()

    def counted(message: Any, **kwargs: Any) -> Any:
        disposition = process(message, **kwargs)
        outcomes[disposition.outcome] += 1
        return disposition

    processor.process = counted
    urls = [f"https://example.com/big/{i}" for i in range(BIG_BATCH)]
    batch_id = stack.client().create_batch(urls).job_id

    # WHEN it completes and the pipeline runs (the ledger only says when to stop looking)
    key = JobKey(JobKind.BATCH, batch_id)
    assert stack.resources is not None
    ledger = Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)
    stack.run_until(lambda: (row := ledger.get(key)) is not None and row.is_done, step=5.0)

    # THEN it took more than one invocation, each stopping at a page boundary before its
    # deadline (how many more depends on the machine's speed: an idle one needs two)
    assert outcomes["in_progress"] >= 1, outcomes
    assert outcomes["stored"] == 1, outcomes
    # AND every item is stored once, and no stored page was read again: the pages read are the
    # 20 pages plus one re-read of its starting page per later invocation (a page cut by a
    # timeout on a loaded machine is read again and its writes answer 412: no new version)
    assert stack.poller is not None
    seen = versions(stack)
    assert max(seen.values()) == 1
    assert not [k for k in seen if k.startswith("dead-letters/")]
    prefix = f"results/batch/{batch_id}/"
    manifest = f"{prefix}manifest.json"
    assert manifest in seen  # written last, once every item was stored
    items = {k.rsplit("/", 2)[-2] for k in seen if k.startswith(prefix) and k != manifest}
    assert len(items) == BIG_BATCH
    pages = routes(stack)[GET_BATCH]
    invocations = stack.poller.batches
    assert BIG_BATCH // PAGE <= pages <= BIG_BATCH // PAGE + invocations, (pages, invocations)


# -- a job that kills every invocation does not take its batch-mates down -----------------------


class Killed(BaseException):
    """The invocation dies here (as on a timeout): no handler code runs after it."""


def test_long_tail_job_that_kills_its_invocation_does_not_starve_its_batch(
    make_stack: MakeStack,
):
    # GIVEN ten settled jobs, no webhooks, no reconciler (it would find them first), and one
    # of them whose processing kills the invocation every time (after its result is written,
    # before DONE)
    stack = make_stack(StackSettings(webhooks=False))
    ids = submit(stack, 10, "batchmates")
    stack.run_until(lambda: all(j["status"] == "completed" for j in truth(stack)), limit=120)
    killer, healthy = ids[0], ids[1:]
    processor = stack.handlers["processor"].get_processor()[0]
    finish = processor._ledger.finish

    def finish_or_die(
        key: JobKey, owner: str, outcome: Any, detail: Any = None, **kwargs: Any
    ) -> Any:
        if key.job_id == killer:
            raise Killed(key.job_id)
        return finish(key, owner, outcome, detail, **kwargs)

    processor._ledger.finish = finish_or_die
    # WHEN the killer's message comes first in one batch with the nine others
    assert stack.resources is not None
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    for job_id in ids:
        queue.send(JobMessage(JobKey(JobKind.EXTRACT, job_id), "test"))
    # THEN the nine are stored at the first redelivery (one visibility timeout, 360 s)
    took = stack.run_until(
        lambda: all(outcome_keys(j)[0] in versions(stack) for j in healthy), step=5.0, limit=700
    )
    assert took <= 400
    # AND only the killer's message ever reaches the DLQ
    for _ in range(40):
        stack.step(60.0)
    sqs = boto3.client("sqs")
    parked: list[str] = []
    while batch := sqs.receive_message(
        QueueUrl=stack.resources.dlq_url, MaxNumberOfMessages=10
    ).get("Messages", []):
        parked += [json.loads(m["Body"])["job_id"] for m in batch]
        for m in batch:
            sqs.delete_message(QueueUrl=stack.resources.dlq_url, ReceiptHandle=m["ReceiptHandle"])
    assert set(parked) <= {killer}, parked
    seen = versions(stack)
    assert all(seen[outcome_keys(j)[0]] == 1 for j in healthy)
