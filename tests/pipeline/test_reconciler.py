"""The reconciler's watermark, checkpoints and bounded work, driven run by run."""

from __future__ import annotations

import boto3

from devstack.stack import LocalStack, StackSettings
from scrape_pipeline.ledger import JobKey, JobKind, JobState, Ledger
from scrape_pipeline.reconciler import JOBS_CHECKPOINT, Reconciler, ReconcileReport
from tests.pipeline.conftest import MakeStack, check_exactly_once, truth

NO_SCHEDULE = 10.0**9  # runs are called by hand in these tests


def reconciler(stack: LocalStack) -> Reconciler:
    found: Reconciler = stack.handlers["reconciler"].get_reconciler()
    return found


def ledger(stack: LocalStack) -> Ledger:
    assert stack.resources is not None
    return Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)


def settle(stack: LocalStack, seconds: float) -> None:
    for _ in range(int(seconds // 10)):
        stack.step(10.0)


def test_reconciler_bounded_work_resumes_where_it_stopped(make_stack: MakeStack):
    # GIVEN 250 jobs nobody was told about, and a budget of one list page per run
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE, env={"RECONCILE_MAX_PAGES": "1"})
    )
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    for i in range(250):
        client.submit_extract(f"https://example.com/many/{i}")
    settle(stack, 700)  # settled, and older than the 600 s threshold
    # WHEN it runs three times
    reports = [reconciler(stack).run() for _ in range(3)]
    # THEN each run read one page, the first two stopped short, and nothing was found twice
    assert [r.list_pages for r in reports] == [1, 1, 1]
    assert [r.complete for r in reports[:2]] == [False, False]
    assert sum(r.recovered["job_list"] for r in reports) == 250
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 250}
    later = reconciler(stack).run()
    assert later.recovered["job_list"] == 0


def test_reconciler_watermark_advances_with_completed_passes(make_stack: MakeStack):
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE), job_duration_min_s=1, job_duration_max_s=2
    )
    stack.client().submit_extract("https://example.com/quick")
    settle(stack, 100)
    first = reconciler(stack).run()
    settle(stack, 700)
    second = reconciler(stack).run()
    assert second.watermark > first.watermark  # it moves forward as windows complete
    saved = ledger(stack).client.get_item(
        TableName=ledger(stack).table_name, Key={"pk": {"S": f"meta#{JOBS_CHECKPOINT}"}}
    )["Item"]
    assert float(saved["watermark"]["S"]) == second.watermark


def test_reconciler_watermark_pinned_by_unsettled_job(make_stack: MakeStack):
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE),
        job_duration_min_s=5000,
        job_duration_max_s=5001,
    )
    client = stack.client()
    created = stack.clock.time()
    client.submit_extract("https://example.com/slow")
    settle(stack, 1300)
    report = reconciler(stack).run()
    # the slow job was created ~1300 s ago and is not settled: the watermark cannot pass it
    assert report.watermark <= created + 1
    assert report.recovered["job_list"] == 0


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
    reconciler(stack).sweep_stuck_rows(early)
    assert early.recovered["stuck_rows"] == 0
    settle(stack, 1000)
    late = ReconcileReport()
    reconciler(stack).sweep_stuck_rows(late)
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
    reconciler(stack).sweep_delivery_log(first)
    assert first.recovered["delivery_log"] == 30
    settle(stack, 60)
    second = ReconcileReport()
    reconciler(stack).sweep_delivery_log(second)
    assert second.recovered["delivery_log"] == 0
    assert check_exactly_once(stack) == {"stored": 30}
