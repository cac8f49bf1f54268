"""Both pollers against the simulator over real HTTP, on a fake clock (nothing sleeps for real).

The simulator and the pollers share one ManualClock: a poller's sleep moves time, and jobs
settle as the simulator's schedule says.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import NotFoundError
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from scrape_pipeline_ops.many_poller import ManyJobsPoller, ManyJobsSettings
from scrape_pipeline_ops.polling import JobTimeoutError, PollSchedule, poll_job
from scrape_pipeline_ops.ratebudget import RateBudget

KEY = "poller-key"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def start(clock: ManualClock, **overrides: object) -> SimulatorServer:
    config = {
        "seed": 11,
        "api_keys": (KEY,),
        "rate_limit_per_s": 0,
        "retryable_failure_rate": 0.0,
        "permanent_failure_rate": 0.0,
        "webhook_dispatcher": False,
        **overrides,
    }
    return SimulatorServer(SimConfig(**config), clock).start()  # type: ignore[arg-type]


@pytest.fixture
def sim(clock: ManualClock) -> Iterator[SimulatorServer]:
    server = start(clock)
    yield server
    server.stop()


def client_for(server: SimulatorServer, clock: ManualClock, **kwargs: object) -> GeonodeClient:
    return GeonodeClient(KEY, base_url=server.base_url, clock=clock, rng=random.Random(3), **kwargs)  # type: ignore[arg-type]


def settled_at(server: SimulatorServer, job_id: str) -> float:
    [truth] = [j for j in server.sim.truth_jobs("extract") if j["job_id"] == job_id]
    return float(truth["settled_at"])


def test_poll_job_returns_settled_job_with_backoff(sim: SimulatorServer, clock: ManualClock):
    client = client_for(sim, clock)
    job_id = client.submit_extract("https://example.com/a").job_id

    job = poll_job(client, job_id, clock=clock, rng=random.Random(1))

    assert job.status == "completed" and job.data["markdown"]
    assert clock.time() >= settled_at(sim, job_id)
    # full jitter under a doubling ceiling capped at 30 s
    ceilings = [min(1.0 * 2**i, 30.0) for i in range(len(clock.sleeps))]
    assert all(0 <= s <= c for s, c in zip(clock.sleeps, ceilings, strict=True))


def test_poll_job_tolerates_404_right_after_submit(clock: ManualClock):
    server = start(clock, not_found_lag_s=3.0, job_duration_min_s=5, job_duration_max_s=6)
    try:
        client = client_for(server, clock)
        job_id = client.submit_extract("https://example.com/lag").job_id
        job = poll_job(client, job_id, clock=clock, rng=random.Random(2))
        assert job.status == "completed"
        statuses = server.sim.request_counts()
        assert "404" in str(statuses)  # it did see the lag, and waited it out
    finally:
        server.stop()


def test_poll_job_404_past_grace_raises(sim: SimulatorServer, clock: ManualClock):
    client = client_for(sim, clock)
    with pytest.raises(NotFoundError):
        poll_job(
            client,
            "00000000-0000-0000-0000-000000000000",
            clock=clock,
            schedule=PollSchedule(not_found_grace=10.0),
            rng=random.Random(4),
        )
    assert 10.0 <= clock.time() - 1_800_000_000.0 <= 10.0 + 16.0


def test_poll_job_deadline_raises_timeout(clock: ManualClock):
    server = start(clock, job_duration_min_s=500, job_duration_max_s=600)
    try:
        client = client_for(server, clock)
        job_id = client.submit_extract("https://example.com/slow").job_id
        t0 = clock.time()
        with pytest.raises(JobTimeoutError) as info:
            poll_job(
                client,
                job_id,
                clock=clock,
                schedule=PollSchedule(max_wait=60),
                rng=random.Random(5),
            )
        assert info.value.job_ids == [job_id]
        assert clock.time() - t0 == pytest.approx(60, abs=0.01)  # one last look at the deadline
    finally:
        server.stop()


def test_poll_job_through_429_storm_honours_retry_after(sim: SimulatorServer, clock: ManualClock):
    client = client_for(sim, clock, retry=RetryPolicy(max_attempts=3, deadline=120))
    job_id = client.submit_extract("https://example.com/storm").job_id
    sim.sim.faults.burst(count=20, status=429)

    job = poll_job(client, job_id, clock=clock, rng=random.Random(6))

    assert job.is_terminal
    retry_after_waits = [s for s in clock.sleeps if s >= 1.0 and float(s).is_integer()]
    assert retry_after_waits, "Retry-After was not honoured"
    # the storm cost requests, but not unboundedly
    assert client.requests_sent <= 20 + 12


def test_many_jobs_poller_yields_each_job_once_for_about_one_request(
    sim: SimulatorServer, clock: ManualClock
):
    client = client_for(sim, clock)
    poller = ManyJobsPoller(client, clock=clock, rng=random.Random(7))
    submitted = [client.submit_extract(f"https://example.com/{i}") for i in range(150)]
    poller.track_all(submitted)
    before = client.requests_sent
    noticed: dict[str, float] = {}

    for settled in poller.run(max_wait=600):
        assert settled.job_id not in noticed
        noticed[settled.job_id] = clock.time()

    assert set(noticed) == {j.job_id for j in submitted}
    requests = client.requests_sent - before
    assert requests / len(submitted) <= 1.2
    delays = sorted(noticed[j] - settled_at(sim, j) for j in noticed)
    assert delays[0] >= 0
    assert delays[int(len(delays) * 0.99)] <= ManyJobsSettings().min_interval + 1.0


def test_many_jobs_poller_reports_failed_jobs_too(clock: ManualClock):
    server = start(clock, retryable_failure_rate=0.3, permanent_failure_rate=0.2)
    try:
        client = client_for(server, clock)
        poller = ManyJobsPoller(client, clock=clock, rng=random.Random(8))
        poller.track_all(client.submit_extract(f"https://example.com/f{i}") for i in range(40))
        statuses = [job.status for job in poller.run(max_wait=600)]
        assert len(statuses) == 40 and "failed" in statuses and "completed" in statuses
        failed = [j for j in server.sim.truth_jobs("extract") if j["final_status"] == "failed"]
        assert statuses.count("failed") == len(failed)
    finally:
        server.stop()


def test_many_jobs_poller_through_429_storm(sim: SimulatorServer, clock: ManualClock):
    client = client_for(sim, clock, retry=RetryPolicy(max_attempts=8, deadline=300))
    poller = ManyJobsPoller(client, clock=clock, rng=random.Random(9))
    poller.track_all(client.submit_extract(f"https://example.com/s{i}") for i in range(30))
    sim.sim.faults.burst(duration_s=30.0, status=429)
    got = list(poller.run(max_wait=900))
    assert len({j.job_id for j in got}) == 30


def test_many_jobs_poller_deadline_names_outstanding(clock: ManualClock):
    server = start(clock, job_duration_min_s=1000, job_duration_max_s=1001)
    try:
        client = client_for(server, clock)
        poller = ManyJobsPoller(client, clock=clock, rng=random.Random(10))
        ids = [client.submit_extract(f"https://example.com/d{i}").job_id for i in range(3)]
        poller.track_all(ids)
        with pytest.raises(JobTimeoutError) as info:
            list(poller.run(max_wait=120))
        assert sorted(info.value.job_ids) == sorted(ids)
        # idle rounds back off: far fewer list calls than one per min_interval
        assert client.requests_sent - 3 < 120 / ManyJobsSettings().min_interval / 2
    finally:
        server.stop()


def test_many_jobs_poller_fetches_unlisted_job_directly(sim: SimulatorServer, clock: ManualClock):
    client = client_for(sim, clock)
    job = client.submit_extract("https://example.com/hidden")
    poller = ManyJobsPoller(client, clock=clock, rng=random.Random(11))
    # tracked with a creation time far from the truth: the listing window misses it
    poller.track(job, created_at=clock.time() + 10_000)
    got = list(poller.run(max_wait=600))
    assert [j.job_id for j in got] == [job.job_id]


def test_rate_budget_spaces_requests(clock: ManualClock):
    budget = RateBudget(rate=2.0, burst=2, clock=clock)
    waits = [budget.acquire() for _ in range(6)]
    assert waits[:2] == [0.0, 0.0]
    assert waits[2:] == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_many_jobs_poller_propagates_auth_errors(sim: SimulatorServer, clock: ManualClock):
    from scrape_pipeline.geonode.errors import AuthError

    good = client_for(sim, clock)
    job = good.submit_extract("https://example.com/auth")
    bad = GeonodeClient("wrong-key", base_url=sim.base_url, clock=clock)
    poller = ManyJobsPoller(bad, clock=clock)
    poller.track(job)
    with pytest.raises(AuthError):
        list(poller.run(max_wait=60))


def test_many_jobs_poller_gives_up_an_unknown_job_after_the_404_grace(
    sim: SimulatorServer, clock: ManualClock
):
    # GIVEN a real job and an id the API never issued, both tracked from now
    client = client_for(sim, clock)
    real = client.submit_extract("https://example.com/real")
    poller = ManyJobsPoller(client, clock=clock, rng=random.Random(12))
    poller.track(real)
    poller.track("00000000-0000-4000-8000-000000000000")
    unknown: list[tuple[str, float]] = []
    started = clock.time()
    # WHEN it runs with an hour to wait
    got = list(poller.run(max_wait=3600, on_unknown=lambda j: unknown.append((j, clock.time()))))
    # THEN the real job is yielded, and the unknown one given up just after the grace
    assert [j.job_id for j in got] == [real.job_id]
    [(job_id, when)] = unknown
    assert job_id == poller.unknown[0] == "00000000-0000-4000-8000-000000000000"
    grace = ManyJobsSettings().not_found_grace
    assert grace <= when - started <= grace + ManyJobsSettings().max_interval
