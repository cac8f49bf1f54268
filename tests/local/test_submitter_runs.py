"""Submission runs inside the stack: a run file uploaded to ``submissions/`` is posted by the
submitter function across invocations cut by their timeout, every URL exactly once.

Judged from outside: the simulator's record of POSTs per URL (``sim.submissions()``), the
invocations the SQS stand-in made and stopped, and the ledger's rows of announced batches.
The function runs with a 4 s timeout (wall time, as Lambda's) and stops claiming 2.8 s before
it: 1.2 s of claims, and room for a POST begun late on a busy machine (a batch POST killed
mid-way would wait for evidence no webhook brings here). So a hundred URLs take several
invocations; S3 itself (moto) delivers the upload's notification to the submissions queue.

``make test`` runs each at the size that proves it (a run handed on from invocation to
invocation; 100 batch POSTs); ``-m slow`` runs the issue's sizes too (150 and 20,000 URLs). No
reconciler is scheduled: no job settles here, and its runs sweep, following every URL's chain
each minute, once took most of these tests' time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings

QUIET = SimConfig(
    seed=7,
    rate_limit_per_s=0,
    retryable_failure_rate=0.0,
    permanent_failure_rate=0.0,
    # The jobs outlast the test: the processor has no result to store meanwhile.
    job_duration_min_s=86_400,
    job_duration_max_s=86_401,
    webhook_jitter=0.0,
    # A lost answer holds its connection past the submitter's timeout: the invocation is
    # killed mid-POST, after the API created the job.
    lost_answer_hold_s=5.0,
)
TIMEOUT_S = 4.0
SETTINGS = StackSettings(
    webhooks=False,
    reconcile_interval=10.0**9,
    submitter_timeout=TIMEOUT_S,
    env={"SUBMITTER_MARGIN_SECONDS": "2.8", "POWERTOOLS_METRICS_DISABLED": "true"},
)
# The sizes, past the suite's 120 s on a busy machine.
SLOW = [pytest.mark.slow, pytest.mark.timeout(600)]
STEP_S = 60.0  # the queue's visibility timeout (960 s) passes in 16 steps


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(ManualClock(), QUIET, SETTINGS).start()
    stack.handlers["submitter"].logger.setLevel("WARNING")
    stack.settle_now()  # S3's test event, sent when the notification was configured
    yield stack
    stack.stop()


def _upload(
    stack: LocalStack, run: str, urls: list[str], options: dict[str, Any] | None = None
) -> None:
    assert stack.resources is not None
    s3 = boto3.client("s3")
    if options is not None:  # first: the .txt's upload starts the run
        s3.put_object(
            Bucket=stack.resources.bucket,
            Key=f"submissions/{run}.json",
            Body=json.dumps(options).encode(),
        )
    body = "# tonight's list\n" + "\n".join(urls) + "\n"
    s3.put_object(Bucket=stack.resources.bucket, Key=f"submissions/{run}.txt", Body=body.encode())


def _posted(stack: LocalStack, urls: list[str]) -> dict[str, int]:
    every = stack.sim.submissions()
    return {url: every.get(url, 0) for url in urls}


def _run_until_posted(stack: LocalStack, urls: list[str], limit_steps: int = 120) -> int:
    """Step the stack until every URL was posted; the steps it took. Each invocation the
    timeout kills on a busy machine costs 16 steps (the visibility timeout) before its
    message comes back: the limit allows several."""
    for steps in range(limit_steps):
        if all(_posted(stack, urls).values()):
            stack.step(STEP_S)  # and once more: nothing left to post a second time
            return steps
        stack.step(STEP_S)
    raise AssertionError(f"not every URL posted after {limit_steps} steps")


@pytest.mark.parametrize(
    "count", [pytest.param(100, id="100"), pytest.param(150, id="150", marks=SLOW)]
)
def test_an_async_run_outlives_its_invocations_and_posts_each_url_once(stack, count):
    # GIVEN a run of URLs, and the first POST's answer lost past the function's timeout
    assert stack.submissions is not None
    urls = [f"https://example.com/async/{i}" for i in range(count)]
    stack.sim.faults.lose_answers("POST /v1/extract", ["timeout"])
    before = stack.submissions.batches, stack.submissions.timeouts
    # WHEN its file is uploaded
    _upload(stack, "nightly-async", urls)
    _run_until_posted(stack, urls)
    # THEN every URL was posted exactly once: the killed POST was looked up, not posted again
    assert _posted(stack, urls) == {url: 1 for url in urls}
    # AND it took several invocations: the one stopped by its timeout, the one its message
    # came back to, and at least one it handed on (40 or so URLs fit in one on an idle machine)
    invocations = stack.submissions.batches - before[0]
    assert stack.submissions.timeouts - before[1] >= 1
    assert invocations >= 3
    # AND no message is left to invoke the function again
    stack.step(STEP_S)
    assert stack.submissions.batches - before[0] == invocations


@pytest.mark.parametrize(
    "count",
    [pytest.param(2_000, id="2000"), pytest.param(20_000, id="20000", marks=SLOW)],
)
def test_a_batch_run_posts_each_url_once_and_announces_its_batches(stack, count):
    # GIVEN a run of URLs in 100 batches (100 POSTs, as many at 2,000 URLs as at 20,000),
    # options uploaded first
    assert stack.submissions is not None and stack.resources is not None
    urls = [f"https://example.com/batch/{i}" for i in range(count)]
    before = stack.submissions.batches
    # WHEN its file is uploaded
    _upload(stack, "nightly-batch", urls, {"mode": "batch", "batch_size": count // 100})
    _run_until_posted(stack, urls)
    # THEN each URL was posted once, in one of 100 batch jobs
    assert _posted(stack, urls) == {url: 1 for url in urls}
    batches = {j["job_id"] for j in stack.sim.truth_jobs("batch_item")}
    assert len(batches) == 100
    # AND over more than one invocation
    assert stack.submissions.batches - before > 1
    # AND each batch is in the ledger, to be watched though its webhook may never come
    table = boto3.resource("dynamodb").Table(stack.resources.table)
    announced = {
        key.split("#", 1)[1]
        for batch_id in batches
        if (key := f"batch#{batch_id}")
        and table.get_item(Key={"pk": key}, ConsistentRead=True).get("Item")
    }
    assert announced == batches


def test_a_bad_run_file_is_dropped_without_a_post_or_a_retry(stack):
    # GIVEN a file with a line that is not a URL
    assert stack.submissions is not None
    before_posts = sum(stack.sim.submissions().values())
    before = stack.submissions.batches, stack.submissions.handler_errors
    # WHEN it is uploaded
    _upload(stack, "broken", ["https://example.com/fine", "not a url"])
    for _ in range(20):
        stack.step(STEP_S)
    # THEN nothing is posted, and the message was handled once (dropped, logged), not retried
    assert sum(stack.sim.submissions().values()) == before_posts
    assert stack.submissions.batches - before[0] == 1
    assert stack.submissions.handler_errors == before[1]
