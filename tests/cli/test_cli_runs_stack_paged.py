"""``runs show`` of a batch and a crawl run with a stack: the ledger's rows the pipeline's
processor left, judged by the simulator's record of each item and page and of its charge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.stack import API_KEY, LocalStack
from tests.cli.conftest import Cli, quiet_stack
from tests.cli.test_cli_runs import _file
from tests.cli.test_cli_runs_stack import _settle


@pytest.fixture(scope="module")
def module_stack() -> Iterator[LocalStack]:
    """The conftest's stack, on an API where two items (or pages) in five fail for good."""
    with quiet_stack(permanent_failure_rate=0.4) as stack:
        yield stack


def _stored_run(
    cli: Cli, live: LocalStack, path: Path, kind: str, *flags: str
) -> tuple[dict[str, Any], list[Any]]:
    """Submit ``path`` as a ``kind`` run, let the pipeline store it, and show it (exit 0):
    its record, and the simulator's own work of its jobs (every batch item or crawl page)."""
    submitted = cli("submit", str(path), "--mode", kind, *flags, "--json", clock=live.clock)
    assert submitted.code == 0, submitted.err
    name = submitted.err.splitlines()[0].split()[2].rstrip(":")
    _settle(live)
    shown = cli("runs", "show", name, "--json")
    assert shown.code == 0, shown.err
    account = live.sim.account_of(API_KEY)
    assert account is not None
    job_ids = {r["job_id"] for r in submitted.records()}
    if kind == "batch":
        work = [w for j in job_ids for _, w in live.sim.get_batch(account, j).items]
    else:
        work = [w for j in job_ids for w in live.sim.get_crawl(account, j).pages]
    return {**shown.record(), "name": name}, work


def test_cli_stack_runs_show_counts_a_batch_run_item_by_item_and_its_tokens(
    live: LocalStack, cli: Cli, tmp_path: Path
):
    # GIVEN five URLs in two batches, some of whose items fail, stored by the pipeline
    path, urls = _file(tmp_path, "stack-paged-batch", 5)
    record, work = _stored_run(cli, live, path, "batch", "--batch-size", "3")
    # THEN each URL is as its item: completed stored, failed dead-lettered (the processor's
    # dead-letter of a failed item); the tokens are the batches' charge; complete, exit 0
    now = live.clock.time()
    assert sorted(w.url for w in work) == sorted(urls)
    completed = sum(w.status(now) == "completed" for w in work)
    failed = sum(w.status(now) == "failed" for w in work)
    assert completed and failed and completed + failed == 5
    assert (record["settled"], record["stored"], record["dead_lettered"]) == (5, completed, failed)
    assert record["tokens_charged"] == sum(w.tokens_charged(now) for w in work) > 0
    # WHEN poll follows the same run into s3://bucket/prefix
    assert live.resources is not None
    bucket = live.resources.bucket
    argv = ("poll", "--run", record["name"], "--out", f"s3://{bucket}/cli-paged", "--json")
    polled = cli(*argv, clock=live.clock)
    # THEN each item is under the prefix with the pipeline's own keys: stored, or its
    # dead-letter record when it failed
    assert polled.code == 0, polled.err
    s3 = boto3.client("s3")
    lines = polled.records()
    assert sorted((r["url"], r["status"]) for r in lines) == sorted(
        (w.url, w.status(now)) for w in work
    )
    for line in lines:
        where = f"batch/{line['job_id']}/{line['item']:05d}"
        key = f"results/{where}/metadata.json" if line["status"] == "completed" else None
        key = key or f"dead-letters/{where}.json"
        body = json.loads(s3.get_object(Bucket=bucket, Key=f"cli-paged/{key}")["Body"].read())
        assert body["url"] == line["url"]
        assert line["written"].startswith(f"s3://{bucket}/cli-paged/")


def test_cli_stack_runs_show_counts_a_crawl_run_tokens_of_all_its_pages(
    live: LocalStack, cli: Cli, tmp_path: Path
):
    # GIVEN one start URL crawled four pages deep, stored by the pipeline
    path, _ = _file(tmp_path, "stack-paged-crawl", 1)
    record, work = _stored_run(cli, live, path, "crawl", "--max-pages", "4")
    # THEN the start URL is settled and stored as its crawl, charged its pages' tokens
    assert len(work) == 4
    assert (record["settled"], record["stored"], record["dead_lettered"]) == (1, 1, 0)
    now = live.clock.time()
    assert record["tokens_charged"] == sum(w.tokens_charged(now) for w in work) > 0
