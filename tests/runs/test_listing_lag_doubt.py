"""Issue 35 item 1: a POST whose answer is lost while the API lists jobs 240-265 s late (the
``listing-lag`` chaos profile) is never posted again, by ``submit`` or by the submitter
function. Judged by the simulator's count of POSTs per URL, never by the journal's word; the
clock is the manual one, advanced by the engine's own waits."""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.listing_lag import JOBS_CHECKPOINT, ListingLag
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.reconciler.sweeps.job_list_state import Checkpoint
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.inside import Next
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline.runs.posting import SubmitterSettings
from scrape_pipeline.runs.report import Event, EventKind
from scrape_pipeline_local.chaos import PROFILES
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.integration.test_client_simulator import KEY, start
from tests.runs.test_inside import _inside, _posted, _upload, aws, moto_endpoint

__all__ = ["aws", "moto_endpoint"]
LAG = PROFILES["listing-lag"].listing_lag
assert LAG is not None
LOW, HIGH = LAG
S = EntryState


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sim(clock: ManualClock) -> Iterator[SimulatorServer]:
    """The simulator listing each job 240-265 s after its creation (the chaos profile's)."""
    server = start(clock, balance_tokens=None, listing_lag_min_s=LOW, listing_lag_max_s=HIGH)
    yield server
    server.stop()


@pytest.fixture
def api(sim: SimulatorServer, clock: ManualClock) -> Iterator[GeonodeClient]:
    with GeonodeClient(
        KEY, base_url=sim.base_url, clock=clock, retry=RetryPolicy(max_attempts=1)
    ) as client:
        yield client


class Doubts:
    """How long each entry stayed in doubt: from its POST to its adoption (manual clock)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.seconds: list[float] = []
        self.catching_up = 0

    def __call__(self, event: Event) -> None:
        if event.kind is EventKind.CATCHING_UP:
            self.catching_up += 1
        if event.kind is EventKind.ADOPTED and event.entry.posted_at is not None:
            self.seconds.append(self.clock.time() - event.entry.posted_at)


def _lost(sim: SimulatorServer, count: int) -> None:
    """The next ``count`` extract POSTs create their job and lose the answer (a 504)."""
    sim.sim.faults.lose_answers("POST /v1/extract", [504] * count)


def test_submit_under_listing_lag_adopts_each_lost_answer_and_posts_each_url_once(
    sim: SimulatorServer, api: GeonodeClient, clock: ManualClock, tmp_path: Path
):
    # GIVEN a run of 10 URLs whose first 4 POSTs create their job and lose the answer, while
    # the API lists every job 240-265 s late
    urls = [f"https://example.com/lag/{i}" for i in range(10)]
    _lost(sim, 4)
    doubts = Doubts(clock)
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        submitter = Submitter(
            journal, api, clock=clock, pace=Pace(clock), rng=random.Random(3), listener=doubts
        )
        # WHEN the run is submitted (as `submit` does, the engine waiting on the manual clock)
        report = submitter.submit(RunSpec.of(urls, RunMode.ASYNC, {}))
    finally:
        journal.close()
    # THEN every URL was created exactly once, the lost ones adopted from the job list
    assert _posted(sim, urls) == {url: 1 for url in urls}
    assert report.complete and len(doubts.seconds) == 4
    # AND each stayed in doubt until the job list could show it, and it was said so
    assert doubts.catching_up >= 1
    assert min(doubts.seconds) >= HIGH
    print(
        f"in doubt: p50 {statistics.median(doubts.seconds):.0f} s, max {max(doubts.seconds):.0f} s"
    )


def test_submit_allows_for_the_lag_the_reconciler_measured_beyond_the_floor(
    clock: ManualClock, tmp_path: Path, table: tuple[str, str]
):
    # GIVEN an API listing jobs 500-560 s late, past the 300 s floor, and the reconciler's
    # checkpoint row with the 560 s it measured
    server = start(clock, balance_tokens=None, listing_lag_min_s=500.0, listing_lag_max_s=560.0)
    endpoint, name = table
    ledger = Ledger(name, client=boto3.client("dynamodb", endpoint_url=endpoint), clock=clock)
    mark = Checkpoint(clock.time())
    mark.measured(560.0, clock.time())
    Bookkeeping(ledger).write(JOBS_CHECKPOINT, mark.fields())
    lag = ListingLag(Bookkeeping(ledger), clock=clock).allowed()
    assert lag == 1120.0  # twice the measured lag
    urls = [f"https://example.com/measured/{i}" for i in range(3)]
    _lost(server, 2)
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        with GeonodeClient(
            KEY, base_url=server.base_url, clock=clock, retry=RetryPolicy(max_attempts=1)
        ) as api:
            settings = SubmitterSettings(listing_delay_s=lag)
            report = Submitter(
                journal, api, clock=clock, pace=Pace(clock), settings=settings
            ).submit(RunSpec.of(urls, RunMode.ASYNC, {}))
        # THEN each URL was created once
        assert _posted(server, urls) == {url: 1 for url in urls}
        assert report.complete
    finally:
        journal.close()
        server.stop()


def test_the_submitter_function_keeps_a_lost_answer_in_doubt_until_the_list_catches_up(
    aws: dict[str, str], sim: SimulatorServer, clock: ManualClock
):
    # GIVEN an upload of 5 URLs whose first 2 POSTs lose their answer, the API listing 240-265 s
    # late
    inside = _inside(aws, sim, clock)
    urls = [f"https://example.com/fn-lag/{i}" for i in range(5)]
    _lost(sim, 2)
    # WHEN the upload is handled, then each continuation when its delay is up
    [first] = inside.handle(_upload(aws, "fn-lag", urls), lambda: 900.0)
    # THEN the first round posts nothing twice and hands the doubts on, saying until when
    assert first.next is Next.CONTINUED, first
    assert "catch up" in first.reason and first.delay_s >= 300
    rounds = [first]
    while rounds[-1].next is Next.CONTINUED and len(rounds) < 10:
        clock.advance(float(rounds[-1].delay_s))
        body = json.dumps({"continue": "fn-lag"})
        [then] = inside.handle(body, lambda: 900.0)
        rounds.append(then)
    # AND the run completes with every URL created exactly once
    assert rounds[-1].next is Next.DONE, [r.reason for r in rounds]
    assert _posted(sim, urls) == {url: 1 for url in urls}
