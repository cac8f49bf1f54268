"""A delivery-log backlog larger than one run's budget: every sweep resumes, nothing is lost.

An hour-long receiver outage while a burst of jobs, batches and crawls settles leaves more
failed attempts in the delivery log than one reconciler run may read. Judged from outside:
the simulator's record of every unit of work against S3's object versions, and the
reconciler's own reports only for how many pages each scheduled run read.
"""

from __future__ import annotations

import math
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_ops.submissions import expect
from tests.pipeline.conftest import MakeStack, versions

OUTAGE_SECONDS = 3600.0
BURST_MINUTES = 10
PER_MINUTE = {"extract": 5, "batch": 3, "crawl": 1}
# Small pages, so 90 units make a backlog of many pages (54: as many as 180 units on pages of
# 10 made, each of which the stack would process)
PAGE_SIZE = 5
PAGES_PER_RUN = 4
RUN_INTERVAL = 600.0
HOOKS = 3  # one subscription per event type
# Failed attempts a job leaves in the log when the receiver answers 503 to every attempt
# of the (0, 5, 300, 1800) schedule: three "failed", then one "abandoned" (not listed).
FAILED_PER_JOB = 3
RUNS_TO_CATCH_UP = 16  # after the burst: the bound of runs for the whole backlog


def _ledger(stack: LocalStack) -> Ledger:
    assert stack.resources is not None
    return Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)


def _submit_minute(stack: LocalStack, minute: int) -> None:
    """One minute of the burst; every other batch and crawl is announced at submission."""
    client = stack.client()
    for i in range(PER_MINUTE["extract"]):
        client.submit_extract(f"https://example.com/backlog/{minute}/{i}")
    for i in range(PER_MINUTE["batch"]):
        batch_id = client.create_batch([f"https://example.com/batch/{minute}/{i}"]).job_id
        if i % 2 == 0:
            expect(_ledger(stack), JobKind.BATCH, batch_id)
    for i in range(PER_MINUTE["crawl"]):
        crawl = client.create_crawl(f"https://example.com/site/{minute}/{i}", max_pages=1)
        if minute % 2 == 0:
            expect(_ledger(stack), JobKind.CRAWL, crawl.job_id)


def _outcome_keys(job: dict[str, Any]) -> tuple[str, str]:
    kind = {"extract": "extract", "batch_item": "batch", "crawl_page": "crawl"}[job["kind"]]
    if kind == "extract":
        return f"results/extract/{job['job_id']}/metadata.json", (
            f"dead-letters/extract/{job['job_id']}.json"
        )
    base = f"{kind}/{job['job_id']}/{int(job['index']):05d}"
    return f"results/{base}/metadata.json", f"dead-letters/{base}.json"


def _without_outcome(stack: LocalStack) -> list[str]:
    """Units of work (extract jobs, batch items, crawl pages) with no outcome object in S3."""
    seen = versions(stack)
    missing = []
    for job in stack.sim.truth_jobs():
        result, dead = _outcome_keys(job)
        if job["status"] in ("queued", "processing") or (result not in seen and dead not in seen):
            missing.append(f"{job['kind']} {job['job_id']}")
    return missing


def _failed_pages(stack: LocalStack) -> int:
    """Pages of failed attempts in the delivery log, all subscriptions together."""
    by_hook: dict[str, int] = {}
    for attempt in stack.sim.delivery_attempts():
        if attempt["status"] == "failed":
            by_hook[attempt["event_type"]] = by_hook.get(attempt["event_type"], 0) + 1
    return sum(math.ceil(n / PAGE_SIZE) for n in by_hook.values())


@pytest.mark.timeout(900)
def test_hour_long_outage_backlog_loses_nothing_and_runs_resume(make_stack: MakeStack):
    # GIVEN a receiver that answers 503 for an hour while a burst of work settles, and a
    # reconciler that may read only a few small delivery-log pages per subscription a run
    stack = make_stack(
        StackSettings(
            reconcile_interval=RUN_INTERVAL,
            env={"RECONCILE_MAX_PAGES": str(PAGES_PER_RUN), "DELIVERY_PAGE_SIZE": str(PAGE_SIZE)},
        ),
        job_duration_min_s=5,
        job_duration_max_s=30,
    )
    assert stack.front is not None and stack.schedule is not None
    stack.front.failing_with = 503
    started = stack.clock.time()
    # (steps as long as what they must resolve: a job's settling and its first retries in the
    # burst, the 300 s and 1800 s retries during the outage, a run every 600 s after it; each
    # step costs the stack's drains whatever is due)
    for minute in range(BURST_MINUTES):
        _submit_minute(stack, minute)
        for _ in range(2):
            stack.step(30.0)
    while stack.clock.time() - started < OUTAGE_SECONDS:
        stack.step(120.0)  # only retries and reconciler runs are due now
    stack.front.failing_with = None
    units = len(stack.sim.truth_jobs())
    assert units == BURST_MINUTES * sum(PER_MINUTE.values())
    # the backlog is far more than one run may read
    backlog_pages = _failed_pages(stack)
    assert backlog_pages > 4 * HOOKS * PAGES_PER_RUN
    assert all(a["http_status"] != 200 for a in stack.sim.delivery_attempts())

    # WHEN the schedule keeps running after the outage
    def caught_up() -> bool:
        runs = stack.schedule.runs if stack.schedule is not None else []
        return bool(runs) and runs[-1]["complete"] and not _without_outcome(stack)

    deadline = stack.clock.time() + RUNS_TO_CATCH_UP * RUN_INTERVAL
    while not caught_up() and stack.clock.time() < deadline:
        for _ in range(3):
            stack.step(100.0)

    # THEN every unit of work is stored, once
    lost = _without_outcome(stack)
    assert lost == [], f"{len(lost)} units never stored: {lost[:5]}"
    assert max(versions(stack).values()) == 1
    # AND the delivery log was read through, each run resuming where the last stopped: no run
    # reads past its page cap, the sweep catches up within a bound of runs, and the pages read
    # until then are about the backlog's (re-reads come only from rows shifted down a page)
    runs = stack.schedule.runs
    pages = [run["delivery_pages"] for run in runs]
    assert max(pages) <= HOOKS * PAGES_PER_RUN
    first_complete = next((i for i, run in enumerate(runs) if i > 0 and run["complete"]), None)
    assert first_complete is not None, f"never caught up: pages per run {pages}"
    # every run after the first took up a pass an earlier run had saved, until caught up
    assert all(run["resumed_passes"] > 0 for run in runs[1:first_complete])
    assert sum(pages[: first_complete + 1]) <= 2 * backlog_pages + HOOKS * (first_complete + 1)
    assert all(run["complete"] for run in runs[first_complete:])
    assert not any(run["errors"] for run in runs)
