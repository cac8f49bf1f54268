"""``status`` shows a batch's items: stored, retrying, dead-lettered, cancelled, and a batch is
"stored" only once every item is (the local stack; counts checked against S3 and the simulator).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.processor.bulk_send import BulkSender
from scrape_pipeline.processor.message import JobMessage
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.cli.conftest import QUIET, Cli, use_stack
from tests.pipeline.direct import NO_RECONCILER


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """No webhooks, no reconciler: the test sends each message itself."""
    config = SimConfig(**{**QUIET, "permanent_failure_rate": 0.1}, item_retryable_failure_rate=0.3)
    settings = StackSettings(webhooks=False, reconcile_interval=NO_RECONCILER)
    started = LocalStack(ManualClock(), config, settings).start()
    yield use_stack(started, monkeypatch)
    started.stop()


def send(stack: LocalStack, kind: JobKind, job_ids: list[str]) -> None:
    assert stack.resources is not None
    queue = BulkSender(stack.resources.queue_url, client=boto3.client("sqs"))
    queue.send_many([JobMessage(JobKey(kind, job_id), "test") for job_id in job_ids])


def s3_keys(stack: LocalStack, prefix: str) -> list[str]:
    assert stack.resources is not None
    pages = boto3.client("s3").get_paginator("list_objects_v2")
    return [
        o["Key"]
        for page in pages.paginate(Bucket=stack.resources.bucket, Prefix=prefix)
        for o in page.get("Contents", [])
    ]


def test_status_shows_a_batchs_items_retrying_then_stored_with_its_dead_letters(
    stack: LocalStack, cli: Cli
):
    # GIVEN a settled 60-URL batch, items failed retryably (30 %) and for good (10 %)
    batch_id = stack.client().create_batch([f"https://example.com/s/{i}" for i in range(60)])
    stack.run_until(
        lambda: all(j["status"] in ("completed", "failed") for j in stack.sim.truth_jobs()),
        step=5.0,
        limit=600,
    )
    items = stack.sim.truth_jobs("batch_item")
    retryable = [j for j in items if j["status"] == "failed" and j["retryable"]]
    for_good = [j for j in items if j["status"] == "failed" and not j["retryable"]]
    assert retryable and for_good

    # WHEN the batch is processed (its retries posted, none settled yet) and status is asked
    send(stack, JobKind.BATCH, [batch_id.job_id])
    stack.run_until(lambda: bool(stack.sim.truth_jobs("extract")), step=1.0, limit=120)
    status = cli("status", "--json").record()["ledger"]

    # THEN its retrying items are counted, and the batch is not finished
    completed = len(items) - len(retryable) - len(for_good)
    assert status["items"] == {
        "stored": completed,
        "retrying": len(retryable),
        "dead_lettered": len(for_good),
        "cancelled": 0,
    }
    assert status["batches_and_crawls"] == {"retrying": 1}
    assert status["not_simply_stored"] == {f"batch#{batch_id.job_id}": f"retrying {len(retryable)}"}
    assert status["by_state"] == {"WATCHING": 1 + len(retryable)}

    # WHEN the retries settle and are processed
    retries = [j["job_id"] for j in stack.sim.truth_jobs("extract")]
    assert len(retries) == len(retryable)
    stack.run_until(
        lambda: all(
            j["status"] != "queued" and j["status"] != "processing"
            for j in stack.sim.truth_jobs("extract")
        ),
        step=5.0,
        limit=600,
    )
    send(stack, JobKind.EXTRACT, retries)
    stack.run_until(
        lambda: cli("status", "--json").record()["ledger"]["items"]["retrying"] == 0,
        step=2.0,
        limit=600,
    )
    status = cli("status", "--json").record()["ledger"]

    # THEN the items are S3's: stored ones (the batch's own and the retries'), dead letters
    # (the batch's items failed for good and the retries that failed), none retrying
    stored = len(s3_keys(stack, f"results/batch/{batch_id.job_id}/")) - 1  # the manifest
    retried_stored = [k for k in s3_keys(stack, "results/extract/") if k.endswith("/metadata.json")]
    dead = s3_keys(stack, f"dead-letters/batch/{batch_id.job_id}/")
    retried_dead = s3_keys(stack, "dead-letters/extract/")
    assert status["items"] == {
        "stored": stored // 2 + len(retried_stored),  # content.md and metadata.json each
        "retrying": 0,
        "dead_lettered": len(dead) + len(retried_dead),
        "cancelled": 0,
    }
    verdict = f"stored with {len(dead) + len(retried_dead)} dead-lettered"
    assert status["not_simply_stored"] == {f"batch#{batch_id.job_id}": verdict}
    assert status["by_outcome"]["stored"] >= 1
    human = cli("status")
    assert re.search(rf"batch#{batch_id.job_id}\s+{verdict}", human.out), human.out
    assert re.search(r"^dead_lettered\s+\d+$", human.out, re.MULTILINE), human.out
