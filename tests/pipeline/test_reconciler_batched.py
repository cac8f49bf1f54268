"""Recovery in batches: what a run costs in AWS and Geonode calls, and that nothing is lost.

Calls are counted on the reconciler's real boto3 clients (botocore's ``before-call`` events)
and by the simulator's own request counter; outcomes are judged from S3's object versions.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.jobs import Source
from scrape_pipeline.processor.queue import BATCH_MAX, read_message
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, check_exactly_once
from tests.pipeline.test_reconciler import NO_SCHEDULE, reconciler, settle

LIST_ROUTE = "GET /v1/extract/jobs"
PAGE = 100  # jobs per list page and keys per BatchGetItem
DROPPED = 25
ALWAYS = 10**6  # an entry failure that never clears


class AwsCalls:
    """Counts the calls made on boto3 clients, by operation name."""

    def __init__(self, *clients: Any) -> None:
        self.counts: Counter[str] = Counter()
        for client in clients:
            client.meta.events.register("before-call", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.counts[model.name] += 1


def aws_calls(found: Reconciler) -> AwsCalls:
    return AwsCalls(found._ledger.client, found._recoverer._queue._sqs)


def list_requests(stack: LocalStack) -> int:
    """Job-list pages the simulator answered (the count check's one-job pages aside)."""
    return sum(1 for page in stack.sim.list_requests() if page["page_size"] > 1)


def dropped_jobs(stack: LocalStack, count: int, prefix: str) -> None:
    client = stack.client()
    for i in range(count):
        client.submit_extract(f"https://example.com/{prefix}/{i}")


def test_reconciler_recovers_in_batches_of_ten(make_stack: MakeStack):
    # GIVEN 150 settled jobs whose webhooks were all dropped (a page and a half: the last
    # page and the last BatchGetItem partial)
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    stack.sim.faults.update(drop_rate=1.0)
    jobs = 150
    dropped_jobs(stack, jobs, "batched")
    settle(stack, 700)
    found = reconciler(stack)
    calls = aws_calls(found)
    # WHEN one run recovers them
    report = found.run()
    # THEN every one went out in SendMessageBatch calls of ten, none one by one
    assert report.recovered[Source.JOB_LIST] == jobs
    assert calls.counts["SendMessageBatch"] == math.ceil(jobs / BATCH_MAX)
    assert calls.counts["SendMessage"] == 0
    assert calls.counts["BatchGetItem"] == math.ceil(jobs / PAGE)
    # AND each job is stored exactly once
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": jobs}


def test_reconciler_healthy_account_costs_a_page_and_a_read_per_hundred(make_stack: MakeStack):
    # GIVEN 200 settled jobs whose webhooks all arrived, so the ledger has them all DONE
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    jobs = 200
    dropped_jobs(stack, jobs, "healthy")
    settle(stack, 700)
    assert check_exactly_once(stack) == {"stored": jobs}
    found = reconciler(stack)
    calls = aws_calls(found)
    pages_before = list_requests(stack)
    # WHEN the job-list sweep reads them
    report = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, report)
    # THEN it cost one list page and one BatchGetItem per 100 jobs, and no write but the
    # checkpoint's (one GetItem to read it, one PutItem a page to save it as it goes, so a
    # run killed mid-pass keeps the pages it read)
    pages = list_requests(stack) - pages_before
    assert report.jobs_seen == jobs
    assert pages == math.ceil(jobs / PAGE) == report.list_pages
    assert calls.counts["BatchGetItem"] == math.ceil(jobs / PAGE)
    assert dict(calls.counts) == {
        "GetItem": 1,
        "BatchGetItem": math.ceil(jobs / PAGE),
        "PutItem": math.ceil(jobs / PAGE),
    }
    assert pages / jobs <= 0.011 and calls.counts["BatchGetItem"] / jobs <= 0.011
    assert report.total_recovered == 0


def failing_entries(
    monkeypatch: pytest.MonkeyPatch, found: Reconciler, fails: Counter[str], times: int
) -> None:
    """SQS reports ``Failed`` for the entries of the jobs in ``fails``, ``times`` times each."""
    sqs = found._recoverer._queue._sqs
    real = sqs.send_message_batch

    def send_message_batch(**kwargs: Any) -> Any:
        passed, failed = [], []
        for entry in kwargs["Entries"]:
            job_id = read_message(entry["MessageBody"]).key.job_id
            if job_id in fails and fails[job_id] < times:
                fails[job_id] += 1
                failed.append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})
            else:
                passed.append(entry)
        response: dict[str, Any] = dict(real(**{**kwargs, "Entries": passed})) if passed else {}
        return {"Successful": [], **response, "Failed": failed}

    monkeypatch.setattr(sqs, "send_message_batch", send_message_batch)


def dropped_with_failing_entries(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, *, unlucky: int, times: int
) -> tuple[LocalStack, Reconciler, Counter[str]]:
    """25 settled, dropped jobs; SQS fails the entries of the first ``unlucky`` ``times``."""
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    stack.sim.faults.update(drop_rate=1.0)
    dropped_jobs(stack, DROPPED, "entries")
    settle(stack, 700)
    found = reconciler(stack)
    fails: Counter[str] = Counter(
        {job["job_id"]: 0 for job in stack.sim.truth_jobs("extract")[:unlucky]}
    )
    failing_entries(monkeypatch, found, fails, times=times)
    return stack, found, fails


def test_reconciler_retries_a_failed_batch_entry_once(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN 25 dropped jobs, and SQS failing the first attempt at three of their entries
    stack, found, fails = dropped_with_failing_entries(make_stack, monkeypatch, unlucky=3, times=1)
    unlucky = list(fails)
    # WHEN a run recovers them
    report = found.run()
    # THEN the failed entries were sent again and every job is stored once
    assert report.errors == {}
    assert dict(fails) == dict.fromkeys(unlucky, 1)
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": DROPPED}


def test_reconciler_persistent_entry_failure_raises_and_loses_nothing(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN 25 dropped jobs, and SQS failing every attempt at one of their entries
    stack, found, fails = dropped_with_failing_entries(
        make_stack, monkeypatch, unlucky=1, times=ALWAYS
    )
    (unlucky,) = fails
    # WHEN a run tries to recover them
    report = found.run()
    # THEN the entry was tried twice, the sweep failed loudly, and the rest went out
    assert fails[unlucky] == 2
    assert "UnsentError" in report.errors[Source.JOB_LIST]  # an AWSUnavailableError
    # AND once SQS accepts it again, a later run recovers the job: nothing was dropped, and
    # its row was put back (not left ENQUEUED with no message until the stale-row sweep)
    fails.clear()
    settle(stack, 60)
    later = found.run()
    assert later.errors == {}
    assert later.total_recovered >= 1
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": DROPPED}


def test_send_many_raises_when_entries_fail_twice(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a queue whose SendMessageBatch fails one entry every time
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    found = reconciler(stack)
    queue = found._recoverer._queue
    messages = [read_message(f'{{"kind":"extract","job_id":"j{i}"}}') for i in range(12)]
    fails: Counter[str] = Counter({"j11": 0})
    failing_entries(monkeypatch, found, fails, times=ALWAYS)
    # WHEN twelve are sent, THEN the failure is raised after one retry
    with pytest.raises(AWSUnavailableError, match="SendMessageBatch"):
        queue.send_many(messages)
    assert fails["j11"] == 2
