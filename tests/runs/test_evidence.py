"""A batch or crawl in doubt adopted from later evidence: its webhook's ledger row (moto on
127.0.0.1, the template's table) and a lookup of its URLs, judged by the simulator's record."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind, JobState, Source
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.evidence import Reads, find_by_evidence
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline.runs.report import Event, EventKind
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.cli.main import main
from scrape_pipeline_ops.geonode_admin import AdminClient
from scrape_pipeline_ops.runs.evidence import LedgerCandidates
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.integration.test_client_simulator import KEY

S = EntryState


def urls(tag: str, n: int) -> list[str]:
    return [f"https://example.com/evidence/{tag}/{i}" for i in range(n)]


@pytest.fixture
def ledger(table: tuple[str, str], clock: ManualClock) -> Ledger:
    endpoint, name = table
    return Ledger(name, client=boto3.client("dynamodb", endpoint_url=endpoint), clock=clock)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    opened = SqliteJournal(tmp_path / "journal" / "runs.sqlite3")
    yield opened
    opened.close()


def submitter(journal: SqliteJournal, client: Any, clock: ManualClock, **kw: Any) -> Submitter:
    return Submitter(journal, client, clock=clock, pace=Pace(clock), rng=random.Random(4), **kw)


def webhook_rows(server: SimulatorServer, ledger: Ledger, clock: ManualClock) -> list[str]:
    """Let every job settle and its webhook go out; record each as the receiver does."""
    clock.advance(3600)
    server.sim.pump()
    kinds = {"batch_completed": JobKind.BATCH, "crawl_completed": JobKind.CRAWL}
    named = []
    for event in server.sim.webhook_events():
        key = JobKey(kinds[event["event_type"]], event["job_id"])
        ledger.record(key, source=Source.WEBHOOK, delivery_id=event["event_id"])
        named.append(event["job_id"])
    return named


def subscribe(client: AdminClient, *event_types: str) -> None:
    # Nobody listens there: the event is owed and recorded, its delivery fails.
    for event_type in event_types:
        client.create_webhook("http://127.0.0.1:9/hook", event_type)


@pytest.mark.parametrize("mode", [RunMode.BATCH, RunMode.CRAWL])
def test_evidence_lost_answer_adopted_once_its_webhook_row_is_in_the_ledger(
    server: SimulatorServer,
    client: AdminClient,
    journal: SqliteJournal,
    clock: ManualClock,
    ledger: Ledger,
    mode: RunMode,
):
    # GIVEN webhooks subscribed, another batch or crawl of other URLs, and a run whose
    # first POST's answer is lost after the API created its job
    subscribe(client, "batch_completed", "crawl_completed")
    if mode is RunMode.BATCH:
        client.create_batch(urls("foreign", 2))
        spec = RunSpec.of(urls("batch", 4), mode, batch_size=2)
    else:
        client.create_crawl(urls("foreign", 1)[0], max_pages=1)
        spec = RunSpec.of(urls("crawl", 2), mode, {"max_pages": 1})
    route = "POST /v1/batch" if mode is RunMode.BATCH else "POST /v1/crawl"
    server.sim.faults.lose_answers(route, [504])
    source = LedgerCandidates(ledger)
    first = submitter(journal, client, clock, evidence=source).submit(spec)
    [doubted] = first.where(S.IN_DOUBT)  # no webhook yet: nothing names it
    # WHEN the webhooks come (rows in the ledger), and the run is submitted again
    named = webhook_rows(server, ledger, clock)
    events: list[Event] = []
    again = submitter(journal, client, clock, evidence=source, listener=events.append).submit(spec)
    # THEN the entry was adopted with its own job, nothing posted again, each URL created once
    assert again.complete and again.posts == 0
    assert [e.entry.index for e in events if e.kind is EventKind.ADOPTED] == [doubted.index]
    submissions = server.sim.submissions()
    assert [submissions.get(u) for u in spec.urls] == [1] * len(spec.urls)
    adopted = again.entries[doubted.index].job_id
    assert adopted in named and len(named) == 1 + len(again.entries)
    record = "batch_item" if mode is RunMode.BATCH else "crawl_page"
    assert {j["url"] for j in server.sim.truth_jobs(record) if j["job_id"] == adopted} >= set(
        doubted.urls[:1]
    )


class Listed:
    """A candidate source that names the given ids."""

    def __init__(self, *job_ids: str) -> None:
        self.job_ids = job_ids

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        return self.job_ids


def test_evidence_is_a_match_only_for_the_same_urls_after_the_post(
    client: AdminClient, clock: ManualClock
):
    # GIVEN batches of the entry's URLs, of a part of them, of more, and one made too early
    entry = urls("match", 3)
    early = client.create_batch(entry).job_id
    clock.advance(1000)
    since = clock.time() - 300
    part = client.create_batch(entry[:2]).job_id
    more = client.create_batch([*entry, "https://example.com/evidence/other"]).job_id
    same = client.create_batch(entry).job_id
    crawl = client.create_crawl(entry[0], max_pages=1).job_id
    batch = RunMode.BATCH
    # THEN only the one of the same URLs since the post is the entry's
    assert find_by_evidence([early, part, more, same], Reads(client), batch, entry, since) == same
    assert find_by_evidence([early, part, more], Reads(client), batch, entry, since) is None
    assert find_by_evidence([same], Reads(client), batch, entry, since, taken={same}) is None
    # a crawl is its start URL's; an id the API does not know is no evidence
    found = find_by_evidence(["no-such-crawl", crawl], Reads(client), RunMode.CRAWL, entry, since)
    assert found == crawl
    assert find_by_evidence([crawl], Reads(client), RunMode.CRAWL, entry[1:], since) is None


def test_evidence_batch_with_an_invalid_url_is_still_the_entry_s(
    client: AdminClient, clock: ManualClock
):
    # The API counts an invalid URL (ignore_invalid_urls) instead of making it an item.
    entry = [*urls("invalid", 2), "not a url"]
    job = client.create_batch(entry).job_id
    since = clock.time() - 300
    assert find_by_evidence([job], Reads(client), RunMode.BATCH, entry, since) == job
    assert find_by_evidence([job], Reads(client), RunMode.BATCH, entry[:2], since) is None


def test_evidence_ledger_candidates_query_the_pending_index_and_scan_for_done_rows(
    ledger: Ledger, clock: ManualClock
):
    # GIVEN an old batch row, a new one, a new crawl and extract, and a new batch row DONE
    old = JobKey(JobKind.BATCH, "batch-old")
    ledger.record(old, source=Source.WEBHOOK)
    clock.advance(1000)
    since = clock.time()
    for key in (
        JobKey(JobKind.BATCH, "batch-new"),
        JobKey(JobKind.CRAWL, "crawl-new"),
        JobKey(JobKind.EXTRACT, "extract-new"),
        JobKey(JobKind.BATCH, "batch-done"),
    ):
        ledger.record(key, source=Source.WEBHOOK, state=JobState.ENQUEUED)
    # (DONE rows leave the sparse pending index)
    ledger.client.update_item(
        TableName=ledger.table_name,
        Key={"pk": {"S": "batch#batch-done"}},
        UpdateExpression="SET #s = :done REMOVE pending_state",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":done": {"S": "DONE"}},
    )
    # THEN the index finds the new rows not DONE, of the kind asked; the scan the DONE one too
    assert list(LedgerCandidates(ledger).candidates(JobKind.BATCH, since)) == ["batch-new"]
    assert list(LedgerCandidates(ledger).candidates(JobKind.CRAWL, since)) == ["crawl-new"]
    scanned = LedgerCandidates(ledger, scan_done=True).candidates(JobKind.BATCH, since)
    assert sorted(scanned) == ["batch-done", "batch-new"]


def test_evidence_runs_resolve_adopts_from_the_ledger_before_asking_for_a_repost(
    server: SimulatorServer,
    client: AdminClient,
    clock: ManualClock,
    ledger: Ledger,
    moto_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    # GIVEN a batch run from the CLI whose first batch's answer was lost, with no stack
    monkeypatch.setenv("SCRAPE_PIPELINE_JOURNAL", str(tmp_path / "journal" / "runs.sqlite3"))
    monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
    monkeypatch.delenv("LEDGER_TABLE_NAME", raising=False)
    subscribe(client, "batch_completed")
    listed = urls("cli", 3)
    path = tmp_path / "urls.txt"
    path.write_text("\n".join(listed) + "\n")
    server.sim.faults.lose_answers("POST /v1/batch", [504])
    argv = ["submit", str(path), "--mode", "batch", "--batch-size", "2"]
    assert main(argv, clock=clock) == 1
    name = capsys.readouterr().err.splitlines()[0].split()[2].rstrip(":")
    # WHEN its webhook reaches the stack's ledger and the operator resolves with the stack
    webhook_rows(server, ledger, clock)
    monkeypatch.setenv("LEDGER_TABLE_NAME", ledger.table_name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    journal = str(tmp_path / "journal" / "runs.sqlite3")  # the file the run is in
    code = main(["runs", "resolve", name, "--journal", journal], clock=clock)
    # THEN it was adopted without --repost-in-doubt: the run is complete, each URL once
    err = capsys.readouterr().err
    assert code == 0, err
    submissions = server.sim.submissions()
    assert [submissions.get(u) for u in listed] == [1, 1, 1]


class Counting:
    """The client, counting the batches it was asked about."""

    def __init__(self, client: AdminClient) -> None:
        self.client = client
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def get_batch(self, batch_id: str, **kwargs: Any) -> Any:
        self.asked.append(batch_id)
        return self.client.get_batch(batch_id, **kwargs)


def test_evidence_asks_the_source_once_and_the_api_once_per_candidate(
    server: SimulatorServer, client: AdminClient, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN three batches whose answers were all lost, and a foreign batch
    foreign = client.create_batch(urls("foreign-many", 2)).job_id
    spec = RunSpec.of(urls("many", 6), RunMode.BATCH, batch_size=2)
    server.sim.faults.lose_answers("POST /v1/batch", [504, 504, 504])
    assert len(submitter(journal, client, clock).submit(spec).where(S.IN_DOUBT)) == 3
    created = list(dict.fromkeys(j["job_id"] for j in server.sim.truth_jobs("batch_item")))
    # WHEN a submit has evidence naming the four
    counting = Counting(client)
    assert created[0] == foreign
    named = Listed(foreign, *reversed(created[1:]))  # each entry's own job last
    again = submitter(journal, counting, clock, evidence=named).submit(spec)
    # THEN all three were adopted, and each batch was asked about once
    assert again.complete and again.posts == 0
    assert sorted(counting.asked) == sorted(created)
    submissions = server.sim.submissions()
    assert [submissions.get(u) for u in spec.urls] == [1] * 6


def test_evidence_never_adopts_the_batch_another_run_of_the_same_urls_holds(
    server: SimulatorServer, client: AdminClient, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN a run of two URLs as markdown, then the same URLs as html, whose answer is lost
    listed = urls("two-runs", 2)
    markdown = RunSpec.of(listed, RunMode.BATCH, {"formats": ["markdown"]})
    html = RunSpec.of(listed, RunMode.BATCH, {"formats": ["html"]})
    assert submitter(journal, client, clock).submit(markdown).complete
    server.sim.faults.lose_answers("POST /v1/batch", [504])
    assert submitter(journal, client, clock).submit(html).counts == {S.IN_DOUBT: 1}
    first, second = dict.fromkeys(j["job_id"] for j in server.sim.truth_jobs("batch_item"))
    # WHEN evidence names both batches, the markdown run's first
    again = submitter(journal, client, clock, evidence=Listed(first, second)).submit(html)
    # THEN the html run adopted its own batch, not the one the markdown run holds
    assert again.complete and [e.job_id for e in again.entries] == [second]
    assert [server.sim.submissions().get(u) for u in listed] == [2, 2]


def test_evidence_submit_rerun_with_a_stack_adopts_a_lost_batch_once_its_webhook_row_is_there(
    server: SimulatorServer,
    client: AdminClient,
    clock: ManualClock,
    ledger: Ledger,
    moto_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    # GIVEN a batch run submitted with a stack whose first batch's answer was lost
    monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
    monkeypatch.setenv("LEDGER_TABLE_NAME", ledger.table_name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    subscribe(client, "batch_completed")
    listed = urls("rerun", 3)
    path = tmp_path / "urls.txt"
    path.write_text("\n".join(listed) + "\n")
    server.sim.faults.lose_answers("POST /v1/batch", [504])
    argv = ["submit", str(path), "--mode", "batch", "--batch-size", "2"]
    assert main(argv, clock=clock) == 1
    assert "in doubt" in capsys.readouterr().err
    # WHEN its webhook reaches the ledger and the same command runs again
    webhook_rows(server, ledger, clock)
    code = main(argv, clock=clock)
    # THEN the rerun adopted it (no --repost-in-doubt, no operator): complete, each URL once
    err = capsys.readouterr().err
    assert code == 0, err
    submissions = server.sim.submissions()
    assert [submissions.get(u) for u in listed] == [1, 1, 1]
