"""The paged poller of batches and crawls against the simulator over real HTTP, on a manual
clock shared with it (a poller's sleep moves time; nothing sleeps for real)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.jobs import JobKind
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from scrape_pipeline_local.simulator.state import Batch
from scrape_pipeline_ops.many_poller import ManyJobsSettings
from scrape_pipeline_ops.paged_poller import PagedJob, PagedJobsPoller
from scrape_pipeline_ops.polling import JobTimeoutError
from tests.cli.conftest import QUIET

KEY = "paged-poller-key"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sim(clock: ManualClock) -> Iterator[SimulatorServer]:
    config = SimConfig(**QUIET, api_keys=(KEY,), webhook_dispatcher=False, balance_tokens=None)
    with SimulatorServer(config, clock) as server:
        yield server


def _client(sim: SimulatorServer, clock: ManualClock) -> GeonodeClient:
    return GeonodeClient(KEY, base_url=sim.base_url, clock=clock, rng=random.Random(3))


def _poller(sim: SimulatorServer, clock: ManualClock, **settings: float) -> PagedJobsPoller:
    client = _client(sim, clock)
    tuned = ManyJobsSettings(**settings)  # type: ignore[arg-type]
    return PagedJobsPoller(client, settings=tuned, clock=clock, rng=random.Random(5))


def _batch(sim: SimulatorServer, clock: ManualClock, urls: list[str]) -> Batch:
    """A batch of ``urls`` posted over HTTP, as the simulator records it."""
    account = sim.sim.account_of(KEY)
    assert account is not None
    return sim.sim.get_batch(account, _client(sim, clock).create_batch(urls).job_id)


def _followed(
    sim: SimulatorServer, clock: ManualClock, batch: Batch
) -> tuple[PagedJobsPoller, PagedJob]:
    """The poller that followed ``batch`` until it was yielded, and what it yielded (once)."""
    poller = _poller(sim, clock)
    poller.track(JobKind.BATCH, batch.job_id)
    [job] = list(poller.run(max_wait=3600))
    return poller, job


def test_paged_poller_reads_every_page_of_a_large_batch_once_it_settles(
    sim: SimulatorServer, clock: ManualClock
):
    # GIVEN a batch of 120 URLs (three pages of 50)
    urls = [f"https://example.com/paged/{i}" for i in range(120)]
    batch = _batch(sim, clock, urls)
    # WHEN followed
    poller, job = _followed(sim, clock, batch)
    # THEN it is yielded once, after the last of its items settled, with every item and the
    # simulator's charge; and never before
    last = max(work.settle_at for _, work in batch.items)
    assert clock.time() >= last
    assert sorted(item.url or "" for item in job.items) == sorted(urls)
    assert [index for index, _ in job.numbered()] == list(range(120))
    assert job.tokens_charged == sum(w.tokens_charged(clock.time()) for _, w in batch.items)
    assert poller.outstanding == []


def test_paged_poller_waits_for_a_cancelled_batch_to_drain(
    sim: SimulatorServer, clock: ManualClock
):
    # GIVEN a batch cancelled while some items run: cancelled at once, in-flight ones drain
    batch = _batch(sim, clock, [f"https://example.com/drain/{i}" for i in range(8)])
    clock.advance(min(work.started_at for _, work in batch.items) - clock.time() + 0.01)
    sim.sim.cancel_batch(batch.job_id)
    drained = batch.settle_at
    assert drained > clock.time()  # an item was running: the batch is cancelled, not drained
    _, job = _followed(sim, clock, batch)
    # THEN it is yielded only once nothing is pending, every item terminal
    assert job.status == "cancelled"
    assert clock.time() >= drained
    assert all(item.is_terminal for item in job.items)
    assert {str(item.status) for item in job.items} == {"cancelled", "completed"}


def test_paged_poller_gives_up_an_unknown_crawl_after_the_grace_and_times_out_the_rest(
    sim: SimulatorServer, clock: ManualClock
):
    # GIVEN a crawl id the API never made, beside a real crawl
    account = sim.sim.account_of(KEY)
    assert account is not None
    made = _client(sim, clock).create_crawl("https://example.com/grace", max_pages=3)
    crawl = sim.sim.get_crawl(account, made.job_id)
    unknown = "00000000-0000-4000-8000-000000000000"
    poller = _poller(sim, clock, not_found_grace=30.0)
    poller.track(JobKind.CRAWL, unknown)
    poller.track(JobKind.CRAWL, crawl.job_id)
    given_up: list[tuple[str, float]] = []
    # WHEN followed for less time than the crawl takes
    started = clock.time()
    with pytest.raises(JobTimeoutError) as timed_out:
        list(poller.run(max_wait=0.4, on_unknown=lambda j: given_up.append((j, clock.time()))))
    # THEN the real crawl is named unsettled, the unknown one still within its grace
    assert set(timed_out.value.job_ids) == {unknown, crawl.job_id}
    assert given_up == []
    # WHEN followed again until the end: the unknown one given up once its grace passed,
    # the crawl yielded with its pages
    [job] = list(poller.run(max_wait=3600, on_unknown=lambda j: given_up.append((j, clock.time()))))
    assert [job_id for job_id, _ in given_up] == [unknown] == poller.unknown
    assert given_up[0][1] - started >= 30.0
    assert (job.job_id, len(job.items)) == (crawl.job_id, 3)


def test_paged_poller_refuses_an_extract_job(sim: SimulatorServer, clock: ManualClock):
    with pytest.raises(ValueError, match="many-jobs poller"):
        _poller(sim, clock).track(JobKind.EXTRACT, "00000000-0000-4000-8000-000000000001")
