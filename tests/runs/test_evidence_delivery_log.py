"""A batch or crawl in doubt adopted from the webhook delivery log, without a stack: the
simulator over real HTTP on 127.0.0.1, its subscriptions pointed at a port nobody listens
on (every delivery fails, and is logged), judged by its record of POSTs per URL."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.receiver.payload import EVENT_KINDS
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.evidence import DeliveryLogCandidates
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.cli.main import main
from scrape_pipeline_ops.geonode_admin import AdminClient
from scrape_pipeline_ops.runs.evidence import AnyOf
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.integration.test_client_simulator import KEY

DELIVERIES = "GET /v1/webhooks/{webhook_id}/deliveries"
POST_BATCH = "POST /v1/batch"
DEAD = "http://127.0.0.1:9/hook"  # nobody listens: each attempt fails and is logged


def urls(tag: str, n: int) -> list[str]:
    return [f"https://example.com/delivery-log/{tag}/{i}" for i in range(n)]


def settle_and_deliver(server: SimulatorServer, clock: ManualClock) -> None:
    """Let every job settle and its first delivery attempt (and the 5 s retry) be made."""
    clock.advance(3600)
    server.sim.pump()
    clock.advance(10)
    server.sim.pump()


def route_count(server: SimulatorServer, route: str) -> int:
    return int(server.sim.stats.snapshot()["by_route"].get(route, 0))


def batch_of(server: SimulatorServer, url: str) -> str:
    [job_id] = {j["job_id"] for j in server.sim.truth_jobs("batch_item") if j["url"] == url}
    return str(job_id)


def test_delivery_log_names_the_kind_s_jobs_since_once_each_and_stops_at_older_attempts(
    server: SimulatorServer, client: AdminClient, clock: ManualClock
):
    # GIVEN subscriptions of each kind, and 110 batches whose deliveries were all tried and
    # abandoned long ago (8 attempts each: 880 older attempts, 9 pages of the log)
    client.create_webhook(DEAD, "batch_completed")
    client.create_webhook(DEAD, "crawl_completed")
    client.create_webhook(DEAD, "extract_completed")
    old = {client.create_batch(urls(f"old-{i}", 1)).job_id for i in range(110)}
    for _ in range(9):
        clock.advance(12 * 3600)  # past the longest wait of the retry schedule
        server.sim.pump()
    assert {a["status"] for a in server.sim.delivery_attempts()} == {"failed", "abandoned"}
    # ... then, since ``since``, two batches, a crawl and an extract, each attempt retried
    clock.advance(1000)
    since = clock.time()
    new = {client.create_batch(urls(f"new-{i}", 2)).job_id for i in range(2)}
    crawl = client.create_crawl(urls("crawl", 1)[0], max_pages=1).job_id
    client.submit_extract(urls("extract", 1)[0])
    settle_and_deliver(server, clock)
    source = DeliveryLogCandidates(client)
    read_before = route_count(server, DELIVERIES)
    # WHEN the batches since then are asked for
    named = list(source.candidates(JobKind.BATCH, since))
    # THEN each new batch once, no old one, from the first page of 100 attempts alone
    assert sorted(named) == sorted(new)
    assert route_count(server, DELIVERIES) - read_before == 1
    # the whole log (every attempt of the 110 old batches too) names them all
    assert set(source.candidates(JobKind.BATCH, 0.0)) == old | new
    assert list(source.candidates(JobKind.CRAWL, since)) == [crawl]
    assert list(source.candidates(JobKind.EXTRACT, since)) != []  # its own subscription


def test_delivery_log_of_an_account_without_subscriptions_is_no_evidence_and_no_error(
    server: SimulatorServer, client: AdminClient, clock: ManualClock
):
    # GIVEN a batch settled on an account subscribed only to extracts
    client.create_webhook(DEAD, "extract_completed")
    client.create_batch(urls("unsubscribed", 2))
    settle_and_deliver(server, clock)
    # THEN nothing is named, and no subscription's log was read
    assert list(DeliveryLogCandidates(client).candidates(JobKind.BATCH, 0.0)) == []
    assert route_count(server, DELIVERIES) == 0


class Failing:
    """A source that cannot be read (an outage)."""

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        raise PipelineError("unreachable")


class Listed:
    def __init__(self, *job_ids: str) -> None:
        self.job_ids = job_ids

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        return self.job_ids


def test_delivery_log_any_of_keeps_what_a_source_named_when_another_fails():
    assert list(
        AnyOf(Listed("a", "b"), Failing(), Listed("b", "c")).candidates(JobKind.BATCH, 0.0)
    ) == ["a", "b", "c"]
    with pytest.raises(PipelineError):
        AnyOf(Failing(), Failing()).candidates(JobKind.BATCH, 0.0)


@dataclass
class Cli:
    """The CLI on the simulator, without a stack: its journal a SQLite file."""

    server: SimulatorServer
    clock: ManualClock
    journal: Path
    tmp_path: Path
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *argv: str) -> tuple[int, str]:
        """Run ``scrape-pipeline ARGV``: its exit status and stderr."""
        code = main(list(argv), clock=self.clock)
        return code, self.capsys.readouterr().err

    def batches(self, listed: list[str]) -> list[str]:
        """``submit`` of ``listed`` in batches of two, from a file."""
        path = self.tmp_path / "urls.txt"
        path.write_text("\n".join(listed) + "\n")
        return ["submit", str(path), "--mode", "batch", "--batch-size", "2"]

    def each_its_own_batch(self, name: str) -> None:
        """Every entry of the run submitted, with the batch the simulator made of its URLs."""
        journal = SqliteJournal(self.journal)
        try:
            entries = journal.entries(name)
        finally:
            journal.close()
        assert all(e.state is EntryState.SUBMITTED for e in entries)
        assert [e.job_id for e in entries] == [batch_of(self.server, e.urls[0]) for e in entries]


@pytest.fixture
def cli(
    server: SimulatorServer,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Cli:
    journal = tmp_path / "journal" / "runs.sqlite3"
    monkeypatch.setenv("SCRAPE_PIPELINE_JOURNAL", str(journal))
    monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
    monkeypatch.delenv("LEDGER_TABLE_NAME", raising=False)
    return Cli(server, clock, journal, tmp_path, capsys)


def run_name(err: str) -> str:
    """The run's name, from submit's first stderr line (``run NAME: ...``)."""
    return err.splitlines()[0].split()[2].rstrip(":")


def test_delivery_log_submit_rerun_without_a_stack_adopts_a_lost_batch(
    server: SimulatorServer, client: AdminClient, clock: ManualClock, cli: Cli
):
    # GIVEN a batch run without a stack whose first batch's answer was lost after the API
    # created it, on an account with a batch_completed subscription nobody receives
    client.create_webhook(DEAD, "batch_completed")
    listed = urls("rerun", 3)
    argv = cli.batches(listed)
    server.sim.faults.lose_answers(POST_BATCH, [504])
    code, err = cli(*argv)
    assert code == 1 and "in doubt" in err
    # WHEN the batch settles (its delivery fails, and is logged) and the command runs again
    settle_and_deliver(server, clock)
    again, again_err = cli(*argv)
    # THEN the rerun adopted it: complete, each URL posted once, two POSTs in all
    assert again == 0, again_err
    submissions = server.sim.submissions()
    assert [submissions.get(u) for u in listed] == [1, 1, 1]
    assert route_count(server, POST_BATCH) == 2
    cli.each_its_own_batch(run_name(err))


def test_delivery_log_resolve_repost_adopts_the_batch_the_api_made_and_reposts_the_other(
    server: SimulatorServer, client: AdminClient, clock: ManualClock, cli: Cli
):
    # GIVEN two batches in doubt: one the API never acted on (a 503 before it did), one whose
    # answer was lost after the API created it
    client.create_webhook(DEAD, "batch_completed")
    listed = urls("resolve", 4)
    argv = cli.batches(listed)
    server.sim.faults.burst(count=1, status=503, route=POST_BATCH)
    server.sim.faults.lose_answers(POST_BATCH, [504])
    code, err = cli(*argv)
    assert code == 1
    name = run_name(err)
    made = server.sim.submissions()
    never = [u for u in listed if not made.get(u)]
    assert len(never) == 2 and route_count(server, POST_BATCH) == 2
    # WHEN the made one settles, and the operator orders what is still in doubt re-posted
    settle_and_deliver(server, clock)
    code, err = cli("runs", "resolve", name, "--repost-in-doubt")
    # THEN only the batch no evidence named went back to planned ...
    assert code == 1  # one entry planned: the run is not complete yet
    [planned_again] = [line for line in err.splitlines() if "planned again:" in line]
    assert never[0] in planned_again
    # ... and the next submit posted it once: every URL made once, three POSTs in all
    code, err = cli(*argv)
    assert code == 0, err
    submissions = server.sim.submissions()
    assert [submissions.get(u) for u in listed] == [1, 1, 1, 1]
    assert route_count(server, POST_BATCH) == 3
    cli.each_its_own_batch(name)


def test_delivery_log_resolve_without_subscriptions_leaves_the_batch_in_doubt(
    server: SimulatorServer, clock: ManualClock, cli: Cli
):
    # GIVEN a lost batch answer on an account with no subscription
    server.sim.faults.lose_answers(POST_BATCH, [504])
    code, err = cli(*cli.batches(urls("no-subscription", 2)))
    assert code == 1
    settle_and_deliver(server, clock)
    # WHEN the operator resolves without --repost-in-doubt
    code, err = cli("runs", "resolve", run_name(err))
    # THEN it is still in doubt (exit 1, named), no error, nothing posted again
    assert code == 1 and "in doubt: #0" in err and "Traceback" not in err
    assert route_count(server, POST_BATCH) == 1


def test_delivery_log_is_read_after_posting_not_by_a_rerun_cut_before_it(
    server: SimulatorServer, client: AdminClient, clock: ManualClock, tmp_path: Path
):
    # GIVEN a batch in doubt (answer lost) whose delivery is logged, and one batch planned
    client.create_webhook(DEAD, "batch_completed")
    journal = SqliteJournal(tmp_path / "runs.sqlite3")
    source = DeliveryLogCandidates(client)
    spec = RunSpec.of(urls("cut", 4), RunMode.BATCH, batch_size=2)
    server.sim.faults.lose_answers(POST_BATCH, [504])
    submitter = Submitter(journal, client, clock=clock, pace=Pace(clock), evidence=source)
    planned = submitter.plan(spec)
    # one POST, then the time is up
    first = submitter.work(
        planned, time_left=lambda: 1e9 if route_count(server, POST_BATCH) < 1 else 0.0
    )
    assert first.counts == {EntryState.IN_DOUBT: 1, EntryState.PLANNED: 1}
    settle_and_deliver(server, clock)
    # WHEN a rerun is cut before posting anything
    cut = Submitter(journal, client, clock=clock, pace=Pace(clock), evidence=source).work(
        planned, time_left=lambda: 0.0
    )
    # THEN it read no evidence (a rerun killed again pays nothing for it) ...
    assert cut.counts == {EntryState.IN_DOUBT: 1, EntryState.PLANNED: 1}
    assert route_count(server, "GET /v1/webhooks") == 0
    # ... and one that posts reads it once, after posting, and adopts the batch
    done = Submitter(journal, client, clock=clock, pace=Pace(clock), evidence=source).work(planned)
    journal.close()
    assert done.complete and route_count(server, "GET /v1/webhooks") == 1
    assert [server.sim.submissions().get(u) for u in spec.urls] == [1] * 4


def test_delivery_log_looks_for_each_kind_under_the_event_the_receiver_reads():
    assert {f"{kind}_completed": kind for kind in JobKind} == dict(EVENT_KINDS)
