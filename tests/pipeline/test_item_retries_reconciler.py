"""A batch whose items are still retrying is unfinished for the reconciler too: with no webhook
and every wake of the batch lost, the watch sweep alone finds its retries settled and it is
closed, each item stored once, after the last of them and without another GET of the batch.
"""

from __future__ import annotations

import boto3

from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, truth
from tests.pipeline.test_big_jobs import gets, ledger, processor
from tests.pipeline.test_item_retries import check_items_retried, done


def send(stack: LocalStack, key: JobKey) -> None:
    assert stack.resources is not None
    JobQueue(stack.resources.queue_url, client=boto3.client("sqs")).send(JobMessage(key, "test"))


def retrying(stack: LocalStack, key: JobKey) -> int:
    row = ledger(stack).get(key)
    return 0 if row is None else row.items_retrying


def test_a_batch_with_items_retrying_is_left_to_the_watch_sweep_until_they_settle(
    make_stack: MakeStack,
):
    # GIVEN a settled 80-URL batch whose items failed retryably at 30 %, no webhooks, and a
    # processor whose wake of a batch (once a retry settles) is lost
    stack = make_stack(StackSettings(webhooks=False), item_retryable_failure_rate=0.3)
    processor(stack)._closer._waker = lambda _parent: None  # each wake is lost
    batch = stack.client().create_batch([f"https://example.com/w/{i}" for i in range(80)])
    key = JobKey(JobKind.BATCH, batch.job_id)
    stack.run_until(
        lambda: all(j["status"] != "processing" for j in truth(stack, "batch_item")),
        step=5.0,
        limit=600,
    )

    # WHEN it is processed once (its pages stored, its retries posted)
    send(stack, key)
    stack.run_until(lambda: retrying(stack, key) > 0, step=1.0, limit=120)
    row = ledger(stack).get(key)
    batch_gets = gets(stack, "batch")

    # THEN it is parked unfinished, WATCHING with its items retrying
    failed = [j for j in truth(stack, "batch_item") if j["status"] == "failed"]
    assert row is not None and row.state is JobState.WATCHING and not row.is_done
    assert row.items_retrying == len(failed) > 0

    # WHEN the stack runs on (the reconciler on its schedule) until the batch is DONE
    took = stack.run_until(lambda: done(stack, key), step=10.0, limit=4 * 3600)

    # THEN every item was stored once (the retries' results named by the manifest, none left
    # retrying), the batch woken by the watch sweep within its poll cap, no GET of it again
    tally = check_items_retried(stack, "batch", batch.job_id)
    assert tally["retried_stored"] == len(failed)
    assert all(j["status"] == "completed" for j in truth(stack, "extract"))
    woken = sum(run["recovered"].get("watch", 0) for run in stack.schedule.runs)  # type: ignore[union-attr]
    assert woken > 0
    assert took <= WatchSettings().poll_seconds + 3600
    assert gets(stack, "batch") == batch_gets
