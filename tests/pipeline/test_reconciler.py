"""The reconciler's watermark, checkpoints and bounded work, driven run by run."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from scrape_pipeline.geonode.client import JOBS_PAGE_MAX
from scrape_pipeline.geonode.errors import ServerError
from scrape_pipeline.geonode.listing_lag import JOBS_CHECKPOINT
from scrape_pipeline.jobs import JobKey, JobKind, JobState, Source
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.reconciler.sweeps import saved_passes
from scrape_pipeline.reconciler.sweeps.ledger_scans import SOURCE_STUCK_ROWS
from scrape_pipeline_local.apigw import LambdaContext
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, check_exactly_once, truth

# The bounded-work test's jobs: three job-list pages, the last of one job.
BOUNDED_JOBS = 2 * JOBS_PAGE_MAX + 1

NO_SCHEDULE = 10.0**9  # runs are called by hand in these tests

RECONCILER_TIMEOUT_SECONDS = 300  # template.yaml's ReconcilerFunction Timeout


def reconciler(stack: LocalStack) -> Reconciler:
    found: Reconciler = stack.handlers["reconciler"].get_reconciler()
    return found


def ledger(stack: LocalStack) -> Ledger:
    assert stack.resources is not None
    return Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)


def settle(stack: LocalStack, seconds: float) -> None:
    for _ in range(int(seconds // 10)):
        stack.step(10.0)


def slow_dropped_stack(make_stack: MakeStack) -> LocalStack:
    """A stack run by hand whose jobs take 1,000 s and whose webhooks are all lost."""
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE),
        job_duration_min_s=1000,
        job_duration_max_s=1001,
    )
    stack.sim.faults.update(drop_rate=1.0)
    return stack


def test_reconciler_bounded_work_resumes_where_it_stopped(make_stack: MakeStack):
    # GIVEN 201 jobs nobody was told about (three pages of 100, the last of one job: the
    # fewest for two runs stopped short), and a budget of one list page per run
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE, env={"RECONCILE_MAX_PAGES": "1"})
    )
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    for i in range(BOUNDED_JOBS):
        client.submit_extract(f"https://example.com/many/{i}")
    settle(stack, 700)  # settled, and older than the threshold
    # WHEN it runs three times
    reports = [reconciler(stack).run() for _ in range(3)]
    # THEN each run read one page, the first two stopped short, and nothing was found twice
    assert [r.list_pages for r in reports] == [1, 1, 1]
    assert [r.complete for r in reports[:2]] == [False, False]
    assert sum(r.recovered["job_list"] for r in reports) == BOUNDED_JOBS
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": BOUNDED_JOBS}
    later = reconciler(stack).run()
    assert later.recovered["job_list"] == 0


def test_reconciler_watermark_advances_with_completed_passes(make_stack: MakeStack):
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE), job_duration_min_s=1, job_duration_max_s=2
    )
    stack.client().submit_extract("https://example.com/quick")
    settle(stack, 100)
    first = reconciler(stack).run()
    stack.client().submit_extract("https://example.com/quick-again")
    settle(stack, 700)
    second = reconciler(stack).run()
    # it moves forward to the newest job listed, on the API's own clock
    assert second.watermark > first.watermark
    assert second.watermark == pytest.approx(max(j["created_at"] for j in truth(stack)), abs=1e-3)
    saved = ledger(stack).client.get_item(
        TableName=ledger(stack).table_name, Key={"pk": {"S": f"meta#{JOBS_CHECKPOINT}"}}
    )["Item"]
    assert float(saved["watermark"]["S"]) == second.watermark


def test_reconciler_watches_an_unsettled_job_instead_of_pinning_the_watermark(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a job that runs for 1,000 s and whose webhook is lost
    stack = slow_dropped_stack(make_stack)
    created = stack.clock.time()
    job_id = stack.client().submit_extract("https://example.com/slow").job_id
    settle(stack, 300)
    found = reconciler(stack)
    # WHEN a run lists it still running
    first = found.run()
    # THEN it is recorded WATCHING and the watermark is not held back before it: it is the
    # newest job listed, this one
    assert first.newly_watched == 1
    assert first.watermark >= created
    row = ledger(stack).get(JobKey(JobKind.EXTRACT, job_id))
    assert row is not None and row.state is JobState.WATCHING
    # AND the runs after it read only the ground since the watermark (no day of re-reading)
    starts: list[float] = []
    real = found._client.list_jobs

    def list_jobs(**kwargs: Any) -> Any:
        if kwargs.get("start_date") is not None and not is_count(kwargs):
            starts.append(kwargs["start_date"])
        return real(**kwargs)

    monkeypatch.setattr(found._client, "list_jobs", list_jobs)
    watermark = first.watermark
    for _ in range(12):  # two minutes of the default schedule, past the job's end
        settle(stack, 60)
        report = found.run()
        assert all(start >= watermark - found.settings.job_list.overlap_seconds for start in starts)
        watermark, starts = report.watermark, []
    # AND the watch sweep woke it once it settled: stored once, with one GET
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 1}
    by_route = stack.sim.request_counts()["by_route"]
    assert by_route.get("GET /v1/extract/{job_id}", 0) <= 2


def test_reconciler_re_enqueues_stuck_rows_and_expired_leases(make_stack: MakeStack):
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    stuck = client.submit_extract("https://example.com/stuck").job_id
    leased = client.submit_extract("https://example.com/leased").job_id
    book = ledger(stack)
    book.record(JobKey(JobKind.EXTRACT, stuck), source="webhook")  # a receiver died after this
    book.acquire(JobKey(JobKind.EXTRACT, leased), "dead-worker", 120, source="sqs")
    settle(stack, 30)  # leased: still within its lease; stuck: fresh
    early = ReconcileReport()
    reconciler(stack).run_sweep(SOURCE_STUCK_ROWS, early)
    assert early.recovered["stuck_rows"] == 0
    settle(stack, 1000)
    late = ReconcileReport()
    reconciler(stack).run_sweep(SOURCE_STUCK_ROWS, late)
    assert late.recovered["stuck_rows"] == 2
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 2}
    rows = book.get_many([JobKey(JobKind.EXTRACT, j["job_id"]) for j in truth(stack)])
    assert all(r.state is JobState.DONE for r in rows.values())


def test_reconciler_delivery_log_checkpoint_skips_what_it_read(make_stack: MakeStack):
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    client = stack.client()
    client.rotate_webhook_secret(stack.webhook_ids["extract_completed"])  # every delivery 401s
    for i in range(30):
        client.submit_extract(f"https://example.com/log/{i}")
    settle(stack, 60)
    first = ReconcileReport()
    reconciler(stack).run_sweep(Source.DELIVERY_LOG, first)
    assert first.recovered["delivery_log"] == 30
    settle(stack, 60)
    second = ReconcileReport()
    reconciler(stack).run_sweep(Source.DELIVERY_LOG, second)
    assert second.recovered["delivery_log"] == 0
    assert check_exactly_once(stack) == {"stored": 30}


def test_reconciler_stuck_rows_read_page_after_page(make_stack: MakeStack):
    # GIVEN 12 rows whose receiver died after the put, and ledger pages of 5 rows
    stack = make_stack(
        StackSettings(
            reconcile_interval=NO_SCHEDULE,
            env={"RECONCILE_ROWS_PER_STATE": "5", "RECONCILE_MAX_PAGES": "2"},
        )
    )
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    book = ledger(stack)
    for i in range(12):
        job_id = client.submit_extract(f"https://example.com/stuck/{i}").job_id
        book.record(JobKey(JobKind.EXTRACT, job_id), source="webhook")
    settle(stack, 1000)
    # WHEN the sweep runs twice with a cap of two pages per state
    first, second = ReconcileReport(), ReconcileReport()
    reconciler(stack).run_sweep(SOURCE_STUCK_ROWS, first)
    reconciler(stack).run_sweep(SOURCE_STUCK_ROWS, second)
    # THEN the first run read two pages and stopped short; the second, from the oldest again,
    # found only the rows the first did not reach (those it handled left the stale range)
    assert (first.recovered["stuck_rows"], first.complete) == (10, False)
    assert (second.recovered["stuck_rows"], second.complete) == (2, True)
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 12}


def is_count(list_arguments: dict[str, Any]) -> bool:
    """A list request of the job list's count check (a page of one job), not a page read."""
    return bool(list_arguments.get("page_size") == 1)


class Killed(BaseException):
    """The Lambda killed mid-run: nothing it would have done next reaches AWS."""


class ListKiller:
    """Kills a run (its Lambda timeout) as it asks for its ``at``-th job-list page, once: from
    then on, until ``revive``, no checkpoint write of ``books`` reaches AWS. ``reads`` holds
    the arguments of every list page asked for (the count check's one-job pages aside)."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, found: Reconciler, books: Bookkeeping, at: int
    ) -> None:
        self.reads: list[dict[str, Any]] = []
        self.dead = self.killed = False
        real_list, real_write = found._client.list_jobs, books.write

        def list_jobs(**kwargs: Any) -> Any:
            if is_count(kwargs):
                return real_list(**kwargs)
            self.reads.append(kwargs)
            if len(self.reads) == at and not self.killed:
                self.dead = self.killed = True
                raise Killed
            return real_list(**kwargs)

        def dead_or_write(name: str, fields: Any) -> None:
            if not self.dead:
                real_write(name, fields)

        monkeypatch.setattr(found._client, "list_jobs", list_jobs)
        monkeypatch.setattr(books, "write", dead_or_write)

    def revive(self) -> None:
        """The next run starts (a new container)."""
        self.dead = False
        self.reads.clear()


class FakeRemaining:
    """The Lambda's remaining time, moved by the calls it is charged for (never by sleeping)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


def test_reconciler_sweep_out_of_time_saves_its_page_and_next_run_resumes(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN 60 failed attempts (30 jobs, two attempts each, all 401) in pages of 5, and a
    # delivery log that takes 10 s a page
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE, env={"DELIVERY_PAGE_SIZE": "5"})
    )
    client = stack.client()
    hook = stack.webhook_ids["extract_completed"]
    client.rotate_webhook_secret(hook)
    for i in range(30):
        client.submit_extract(f"https://example.com/slow-log/{i}")
    settle(stack, 60)
    found = reconciler(stack)
    remaining = FakeRemaining(100.0)
    pages: list[int] = []
    real = found._client.list_deliveries

    def slow_page(webhook_id: str, **kwargs: Any) -> Any:
        if webhook_id == hook:
            pages.append(kwargs["page"])
            remaining.seconds -= 10.0
        return real(webhook_id, **kwargs)

    monkeypatch.setattr(found._client, "list_deliveries", slow_page)
    # WHEN a run has 100 s left: 80 after the margin, 40 for the log, at most 20 for this hook
    first = found.run(remaining)
    # THEN it stopped after two pages and saved the third as the pass's resume point
    assert pages == [1, 2]
    assert first.complete is False and first.errors == {}
    (cut_short,) = saved_passes(checkpoint(stack, f"deliveries-{hook}"))
    assert cut_short.page == 3
    assert cut_short.start < cut_short.end
    # AND the next run takes up the pass at that page, not at the top again
    pages.clear()
    second = found.run(FakeRemaining(100.0))
    assert pages[0] == 3
    assert second.resumed_passes >= 1
    # AND runs without a deadline finish the pass and move the checkpoint to its upper bound
    for _ in range(3):
        found.run()
    done = checkpoint(stack, f"deliveries-{hook}")
    assert saved_passes(done) == []
    assert float(done["checkpoint"]) >= cut_short.end
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 30}


def test_reconciler_delivery_log_resumes_a_saved_pass_then_reads_afresh(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN 60 failed attempts (30 jobs, all 401) in pages of 5, and the subscription's row
    # saved by a run cut short: a pass over all of them stopped before its third page
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE, env={"DELIVERY_PAGE_SIZE": "5"})
    )
    client = stack.client()
    hook = stack.webhook_ids["extract_completed"]
    client.rotate_webhook_secret(hook)
    for i in range(30):
        client.submit_extract(f"https://example.com/old-log/{i}")
    settle(stack, 60)
    found = reconciler(stack)
    long_ago = f"{stack.clock.time() - 3600.0:.3f}"
    old = {"checkpoint": long_ago, "pending": f"[[{long_ago},{long_ago},3]]"}
    Bookkeeping(ledger(stack)).write(f"deliveries-{hook}", old)
    pages: list[int] = []
    real = found._client.list_deliveries

    def counted(webhook_id: str, **kwargs: Any) -> Any:
        if webhook_id == hook:
            pages.append(kwargs["page"])
        return real(webhook_id, **kwargs)

    monkeypatch.setattr(found._client, "list_deliveries", counted)
    # WHEN the delivery-log sweep runs
    report = ReconcileReport()
    found.run_sweep(Source.DELIVERY_LOG, report)
    # THEN it took the saved pass up at its third page, then read the log afresh from the top
    assert pages == [*range(3, 13), *range(1, 13)]
    assert (report.resumed_passes, report.errors) == (1, {})
    # AND every job is stored once, and the row is saved with no pass pending
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 30}
    saved = checkpoint(stack, f"deliveries-{hook}")
    assert set(saved) == {"checkpoint"} and saved_passes(saved) == []


def test_reconciler_failing_delivery_log_does_not_starve_the_job_list(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # GIVEN dropped webhooks, settled jobs, and a delivery log that answers 503 every time
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    for i in range(12):
        client.submit_extract(f"https://example.com/no-log/{i}")
    settle(stack, 700)

    def broken(webhook_id: str, **kwargs: Any) -> Any:
        raise ServerError(503, code="UNAVAILABLE", message="delivery log down")

    monkeypatch.setattr(reconciler(stack)._client, "list_deliveries", broken)
    # WHEN the scheduled Lambda runs
    capsys.readouterr()
    summary = stack.handlers["reconciler"].lambda_handler(
        {"source": "aws.scheduler", "detail-type": "Scheduled Event", "detail": {}},
        LambdaContext("reconciler", RECONCILER_TIMEOUT_SECONDS),
    )
    # THEN the run returned, named the failed sweep, and the job list still found every job
    assert set(summary["errors"]) == {"delivery_log"}
    assert "ServerError" in summary["errors"]["delivery_log"]
    assert summary["recovered"]["job_list"] == 12
    assert summary["complete"] is False
    metrics = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line
    ]
    failed = [m for m in metrics if "ReconcileSweepFailed" in m and "sweep" in m]
    assert [(m["sweep"], m["ReconcileSweepFailed"]) for m in failed] == [("delivery_log", [1.0])]
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 12}


def checkpoint(stack: LocalStack, name: str) -> dict[str, str]:
    item = ledger(stack).client.get_item(
        TableName=ledger(stack).table_name, Key={"pk": {"S": f"meta#{name}"}}
    )["Item"]
    return {k: v["S"] for k, v in item.items() if k != "pk"}


def test_reconciler_job_list_runs_every_minute_only_while_webhooks_go_missing(
    make_stack: MakeStack,
):
    # GIVEN a reconciler run every minute, and half an hour of jobs whose webhooks all arrive
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE), job_duration_min_s=1, job_duration_max_s=2
    )
    found = reconciler(stack)
    client = stack.client()
    reports: list[ReconcileReport] = []

    def minute(prefix: str, index: int) -> None:
        client.submit_extract(f"https://example.com/{prefix}/{index}")
        settle(stack, 60)
        reports.append(found.run())

    for index in range(30):
        minute("healthy", index)
    listed = [i for i, report in enumerate(reports) if "job_list" not in report.skipped]
    # THEN a new deployment is watched every minute for the gap memory (15 minutes), then the
    # job list falls back to the full-sweep cadence (every 10 minutes)
    assert set(range(15)) <= set(listed)
    assert len([i for i in listed if i >= 15]) <= 2
    assert not any(report.total_recovered for report in reports)
    # WHEN webhooks start going missing
    stack.sim.faults.update(drop_rate=1.0)
    for index in range(20):
        minute("dropped", index)
    # THEN the next full run finds the first (within 10 minutes), and from then on every run
    # reads the list: the gap is open
    recovering = [i for i in range(30, 50) if reports[i].recovered["job_list"]]
    assert recovering and recovering[0] <= 30 + 10
    assert all("job_list" not in reports[i].skipped for i in range(recovering[0], 50))
    assert all(reports[i].gap_open for i in range(recovering[0], 50))
    settle(stack, 180)
    found.run()
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 50}
