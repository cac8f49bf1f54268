"""The DynamoDB journal announces a batch or crawl in the write of its job id: judged from
outside, by the simulator's record of POSTs per URL and the ledger's rows read back with
boto3 (a moto server on 127.0.0.1, the ledger table made from template.yaml's definition).

moto serialises every request, so a transaction never meets a concurrent write there; AWS
cancels one that does (``TransactionConflict``). ``ConflictingClient`` plays AWS's part: the
cancellation AWS would send, shaped as botocore raises it.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import boto3
import pytest
from botocore.exceptions import ClientError

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.models import SubmittedJob
from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from tests.runs.test_submitter import Crash, CrashingClient, once_each, urls

S = EntryState


@pytest.fixture
def ledger_table(table: tuple[str, str]) -> tuple[Any, str]:
    """(a DynamoDB client on the moto server, the test's ledger table)."""
    endpoint, name = table
    return boto3.client("dynamodb", endpoint_url=endpoint), name


def _submitter(journal: DynamoJournal, client: Any, clock: ManualClock) -> Submitter:
    # No announce callback: the journal announces in the write of the job id.
    return Submitter(journal, client, clock=clock, pace=Pace(clock), rng=random.Random(3))


def _row(db: Any, table: str, kind: str, job_id: str) -> dict[str, Any] | None:
    item = db.get_item(TableName=table, Key={"pk": {"S": f"{kind}#{job_id}"}}).get("Item")
    return dict(item) if item else None


def _job_ids(server: SimulatorServer, kind: str) -> dict[str, str]:
    return {j["url"]: j["job_id"] for j in server.sim.truth_jobs(kind)}


class CrawlCrashingClient(CrashingClient):
    """``CrashingClient`` for crawls: killed on the ``nth`` crawl POST (0: never) with the
    answer in hand; ``answered`` is each URL's crawl id as the API gave it."""

    def __init__(self, client: GeonodeClient, nth: int = 0) -> None:
        super().__init__(client, nth, "after_answer")
        self.answered: dict[str, str] = {}

    def create_crawl(self, url: str, **options: Any) -> SubmittedJob:
        self._posts += 1
        job = self._client.create_crawl(url, **options)
        self.answered[url] = job.job_id
        if self._posts == self._nth:
            raise Crash
        return job


def test_dynamo_crawls_are_born_announced_one_ledger_row_each(
    server: SimulatorServer,
    client: GeonodeClient,
    clock: ManualClock,
    ledger_table: tuple[Any, str],
):
    # GIVEN a crawl run of three URLs through the DynamoDB journal
    db, name = ledger_table
    posted = urls("dyn-crawl", 3)
    journal = DynamoJournal(name, client=db)
    recording = CrawlCrashingClient(client)
    report = _submitter(journal, recording, clock).submit(RunSpec.of(posted, RunMode.CRAWL))
    # THEN each URL was posted once, and the ledger holds each crawl's row as expect writes it
    once_each(server, posted)
    assert report.complete and len(recording.answered) == 3
    for url, job_id in recording.answered.items():
        row = _row(db, name, "crawl", job_id)
        assert row is not None, url
        assert (row["state"]["S"], row["source"]["S"]) == ("WATCHING", "submitted")
        assert row["pending_state"]["S"] == "WATCHING" and "expires_at" in row


@pytest.mark.parametrize("mode", [RunMode.ASYNC, RunMode.CRAWL])
def test_dynamo_crash_between_the_answer_and_the_journal_write_posts_nothing_twice(
    server: SimulatorServer,
    client: GeonodeClient,
    clock: ManualClock,
    ledger_table: tuple[Any, str],
    mode: RunMode,
):
    # GIVEN a run killed on its second POST with the API's answer in hand, unrecorded
    db, name = ledger_table
    posted = urls(f"dyn-kill-{mode.value}", 3)
    spec = RunSpec.of(posted, mode)
    crashing = (
        CrawlCrashingClient(client, 2)
        if mode is RunMode.CRAWL
        else CrashingClient(client, 2, "after_answer")
    )
    with pytest.raises(Crash):
        _submitter(DynamoJournal(name, client=db), crashing, clock).submit(spec)
    # WHEN a new process runs it again (its journal opened anew on the same table)
    report = _submitter(DynamoJournal(name, client=db), client, clock).submit(spec)
    # THEN nothing was posted twice: an extract was found in the job list and adopted; a
    # crawl (no API lists them) is in doubt, never re-posted silently, and has no ledger row
    once_each(server, posted)
    if mode is RunMode.ASYNC:
        assert report.complete
        assert {e.urls[0]: e.job_id for e in report.entries} == _job_ids(server, "extract")
    else:
        [doubt] = report.where(S.IN_DOUBT)
        assert doubt.urls == (posted[1],)
        assert isinstance(crashing, CrawlCrashingClient)
        lost = crashing.answered[posted[1]]
        assert _row(db, name, "crawl", lost) is None
        for entry in report.where(S.SUBMITTED):
            assert _row(db, name, "crawl", entry.job_id or "") is not None


class SettledFirst:
    """The client, with the webhook and the processor quicker than the journal: each crawl's
    ledger row is created and settled (stored) before its job id is recorded."""

    def __init__(self, client: GeonodeClient, ledger: Ledger, db: Any, table: str) -> None:
        self._client = client
        self._ledger = ledger
        self._read = lambda job_id: _row(db, table, "crawl", job_id)
        self.settled: dict[str, dict[str, Any] | None] = {}  # each row as the processor left it

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def create_crawl(self, url: str, **options: Any) -> SubmittedJob:
        job = self._client.create_crawl(url, **options)
        key = JobKey(JobKind.CRAWL, job.job_id)
        self._ledger.record(key, source="webhook")
        self._ledger.acquire(key, "processor", lease_seconds=60, source="sqs")
        self._ledger.finish(key, "processor", Outcome.STORED)
        self.settled[job.job_id] = self._read(job.job_id)
        return job


def test_dynamo_transaction_leaves_a_settled_ledger_row_as_it_is(
    server: SimulatorServer,
    client: GeonodeClient,
    clock: ManualClock,
    ledger_table: tuple[Any, str],
):
    # GIVEN crawls whose ledger rows are settled before the journal records their ids
    db, name = ledger_table
    posted = urls("dyn-settled", 2)
    settled_first = SettledFirst(client, Ledger(name, client=db, clock=clock), db, name)
    # WHEN the run is submitted
    report = _submitter(DynamoJournal(name, client=db), settled_first, clock).submit(
        RunSpec.of(posted, RunMode.CRAWL)
    )
    # THEN every entry is submitted (the transaction did not fail for the existing row), and
    # each row is as the processor left it (DONE, stored, out of the pending index) but for
    # the run that now names it
    once_each(server, posted)
    assert report.complete and all(e.announced for e in report.entries)
    assert len(settled_first.settled) == 2
    for job_id, row in settled_first.settled.items():
        after = _row(db, name, "crawl", job_id)
        assert after is not None and after.pop("run") == {"S": report.run.name}
        assert after == row
        assert after is not None and after["state"]["S"] == "DONE"
        assert "pending_state" not in after


class ConflictingClient:
    """A DynamoDB client whose first ``conflicts`` transactions AWS cancels for a concurrent
    write (moto never does: it serialises every request)."""

    def __init__(self, db: Any, conflicts: int) -> None:
        self._db = db
        self.left = conflicts
        self.cancelled = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def transact_write_items(self, **request: Any) -> Any:
        if self.left > 0:
            self.left -= 1
            self.cancelled += 1
            reasons = [{"Code": "None"}, {"Code": "TransactionConflict", "Message": "conflict"}]
            error = {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": reasons,
            }
            raise ClientError(error, "TransactWriteItems")  # type: ignore[arg-type]
        return self._db.transact_write_items(**request)


def test_dynamo_transaction_conflict_is_tried_again_then_a_retryable_error(
    server: SimulatorServer,
    client: GeonodeClient,
    clock: ManualClock,
    ledger_table: tuple[Any, str],
):
    db, name = ledger_table
    waits: list[float] = []
    # GIVEN two conflicts in a row: the third try writes entry and row
    conflicting = ConflictingClient(db, 0)
    journal = DynamoJournal(name, client=cast("Any", conflicting), sleep=waits.append)
    posted = urls("dyn-conflict", 1)
    recording = CrawlCrashingClient(client)
    submitter = _submitter(journal, recording, clock)
    planned = submitter.plan(RunSpec.of(posted, RunMode.CRAWL))
    conflicting.left = 2
    report = submitter.work(planned)
    assert report.complete and conflicting.cancelled == 2 and len(waits) == 2
    assert _row(db, name, "crawl", recording.answered[posted[0]]) is not None
    # GIVEN conflicts that do not end: a retryable error, and neither entry nor row written
    endless = ConflictingClient(db, 0)
    stuck_journal = DynamoJournal(name, client=cast("Any", endless), sleep=waits.append)
    stuck = _submitter(stuck_journal, recording, clock)
    more = urls("dyn-conflict-endless", 1)
    planned = stuck.plan(RunSpec.of(more, RunMode.CRAWL))
    endless.left = 100
    with pytest.raises(AWSUnavailableError, match="TransactionConflict"):
        stuck.work(planned)
    assert _row(db, name, "crawl", recording.answered[more[0]]) is None
    [entry] = DynamoJournal(name, client=db).entries(RunSpec.of(more, RunMode.CRAWL).derived_name())
    assert entry.state is S.POSTING and entry.job_id is None  # in doubt once its lease is out
    once_each(server, [*posted, *more])


def test_dynamo_transaction_racing_webhooks_one_row_and_the_entry_submitted(
    server: SimulatorServer,
    client: GeonodeClient,
    clock: ManualClock,
    ledger_table: tuple[Any, str],
):
    # GIVEN a crawl posted, and 10 webhooks of its job racing the journal's write of its id
    db, name = ledger_table
    posted = urls("dyn-race", 1)
    journal = DynamoJournal(name, client=db)
    run, _ = journal.plan(RunSpec.of(posted, RunMode.CRAWL), "race", clock.time())
    [entry] = journal.entries(run.name)
    claimed = journal.claim(entry, "me", clock.time())
    job = client.create_crawl(posted[0])
    ledger = Ledger(name, client=db, clock=clock)
    start = threading.Barrier(11)

    def webhook(_: int) -> bool:
        start.wait()
        return ledger.record(JobKey(JobKind.CRAWL, job.job_id), source="webhook").created

    def record() -> EntryState:
        start.wait()
        return journal.submit(claimed, "me", job.job_id, clock.time()).state

    with ThreadPoolExecutor(11) as pool:
        recorded = pool.submit(record)
        created = list(pool.map(webhook, range(10)))
    # THEN the entry is submitted, and exactly one ledger row exists, made by one writer
    assert recorded.result() is S.SUBMITTED
    rows = [i for i in db.scan(TableName=name)["Items"] if i["pk"]["S"].startswith("crawl#")]
    assert len(rows) == 1
    assert created.count(True) == (1 if rows[0]["source"]["S"] == "webhook" else 0)
