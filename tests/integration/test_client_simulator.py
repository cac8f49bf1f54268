"""The API client against the simulator over real HTTP: every endpoint, every error shape."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    AuthError,
    ConflictError,
    NotFoundError,
    PaymentRequiredError,
    RateLimitedError,
    ServerError,
    ValidationError,
)
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from scrape_pipeline_ops.geonode_admin import AdminClient

KEY = "client-key"


def start(clock: ManualClock, **overrides: Any) -> SimulatorServer:
    config: dict[str, Any] = {
        "seed": 5,
        "api_keys": (KEY,),
        "rate_limit_per_s": 0,
        "retryable_failure_rate": 0.0,
        "permanent_failure_rate": 0.0,
        "webhook_dispatcher": False,
        **overrides,
    }
    return SimulatorServer(SimConfig(**config), clock).start()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def server(clock: ManualClock) -> Iterator[SimulatorServer]:
    sim = start(clock)
    yield sim
    sim.stop()


@pytest.fixture
def client(server: SimulatorServer, clock: ManualClock) -> Iterator[AdminClient]:
    with AdminClient(KEY, base_url=server.base_url, clock=clock, rng=random.Random(1)) as c:
        yield c


def test_client_extract_sync(client: AdminClient):
    result = client.extract_sync("https://example.com/s", formats=["markdown", "html"])
    assert result.data["markdown"] and result.data["html"]
    assert result.metadata["url"] == "https://example.com/s"


def test_client_extract_async_then_get(client: AdminClient, clock: ManualClock):
    submitted = client.submit_extract("https://example.com/a", formats=["html"], render_js=True)
    assert submitted.status == "queued" and submitted.status_url
    clock.advance(30)
    job = client.get_job(submitted.job_id)
    assert job.status == "completed" and job.is_terminal
    assert job.data["html"] and job.url == "https://example.com/a"
    assert job.created_at is not None and job.completed_at is not None


def test_client_list_and_iterate_jobs(client: AdminClient, clock: ManualClock):
    ids = [client.submit_extract(f"https://example.com/l{i}").job_id for i in range(130)]
    clock.advance(30)
    first = client.list_jobs(page_size=100)
    assert first.page_count == 2 and len(first.items) == 100
    assert {j.job_id for j in client.iter_jobs()} == set(ids)
    one = client.list_jobs(url="https://example.com/l7")
    assert [j.job_id for j in one.items] == [ids[7]]
    assert all(j.status == "completed" for j in client.iter_jobs(status="completed"))


def test_client_list_jobs_seed_field_name(clock: ManualClock):
    server = start(clock, job_list_field="items")
    try:
        with GeonodeClient(KEY, base_url=server.base_url, clock=clock) as client:
            job_id = client.submit_extract("https://example.com/i").job_id
            clock.advance(1)
            assert [j.job_id for j in client.list_jobs().items] == [job_id]
    finally:
        server.stop()


def test_client_batch_create_get_and_items(client: AdminClient, clock: ManualClock):
    urls = [f"https://example.com/b{i}" for i in range(23)] + ["not a url"]
    batch = client.create_batch(urls)
    clock.advance(60)
    status = client.get_batch(batch.job_id, page_size=10)
    assert status.status == "completed" and status.counters["total_urls"] == 23
    assert status.counters["invalid_urls"] == 1
    assert status.page.page_count == 3
    items = list(client.iter_batch_items(batch.job_id))
    assert sorted(i.url or "" for i in items) == sorted(urls[:-1])
    assert all(i.is_terminal for i in items)


def test_client_crawl_create_get_cancel(client: AdminClient, clock: ManualClock):
    crawl = client.create_crawl("https://example.com/", max_pages=40)
    clock.advance(2)
    cancelled = client.cancel_crawl(crawl.job_id)
    assert cancelled.job_id == crawl.job_id and cancelled.status == "cancelled"
    clock.advance(60)
    status = client.get_crawl(crawl.job_id)
    assert status.status == "cancelled"
    assert len(list(client.iter_crawl_items(crawl.job_id))) == status.counters["total_pages"]
    with pytest.raises(ConflictError):
        client.cancel_crawl(crawl.job_id)


def test_client_webhooks_lifecycle(client: AdminClient):
    hook = client.create_webhook("https://hooks.example/x", "extract_completed", description="d")
    assert hook.secret and hook.secret.startswith("whsec_")
    assert hook.secret not in repr(hook)
    assert [h.id for h in client.list_webhooks()] == [hook.id]
    assert client.get_webhook(hook.id).is_active
    assert client.update_webhook(hook.id, is_active=False).is_active is False
    new_secret = client.rotate_webhook_secret(hook.id)
    assert new_secret != hook.secret and new_secret.startswith("whsec_")
    client.delete_webhook(hook.id)
    with pytest.raises(NotFoundError):
        client.get_webhook(hook.id)


def test_client_deliveries_listing(clock: ManualClock):
    # The subscription points where nobody listens: every attempt fails and is logged.
    server = start(clock, webhook_retry_schedule_s=(0, 1, 1), webhook_jitter=0.0)
    try:
        with AdminClient(KEY, base_url=server.base_url, clock=clock) as client:
            hook = client.create_webhook("http://127.0.0.1:9/nowhere", "extract_completed")
            client.submit_extract("https://example.com/d")
            for _ in range(5):
                clock.advance(30)
                server.sim.drain(timeout=10)
            page = client.list_deliveries(hook.id, page_size=2)
            every = list(client.iter_deliveries(hook.id))
            assert page.items and len(every) == 3
            assert {d.status for d in every} <= {"failed", "abandoned"}
            assert any(d.status == "abandoned" for d in every)
            assert all(not 200 <= (d.http_status or 0) < 300 for d in every)
            failed_only = list(client.iter_deliveries(hook.id, status="abandoned"))
            assert len(failed_only) == 1
    finally:
        server.stop()


def test_client_auth_error_over_http(server: SimulatorServer, clock: ManualClock):
    client = GeonodeClient("wrong", base_url=server.base_url, clock=clock)
    with pytest.raises(AuthError) as info:
        client.get_job("x")
    assert info.value.status_code == 401 and info.value.correlation_id


def test_client_not_found_over_http(client: AdminClient):
    with pytest.raises(NotFoundError) as info:
        client.get_job("00000000-0000-0000-0000-000000000000")
    assert info.value.code and info.value.retryable is False


def test_client_validation_error_over_http(client: AdminClient):
    with pytest.raises(ValidationError) as info:
        client.submit_extract("not-a-url")
    assert info.value.status_code == 422 and info.value.detail
    with pytest.raises(ValidationError):
        client.create_batch([f"https://example.com/{i}" for i in range(1001)])


def test_client_legacy_nested_error_shape(clock: ManualClock):
    server = start(clock, legacy_error_shape=True)
    try:
        client = GeonodeClient(KEY, base_url=server.base_url, clock=clock)
        with pytest.raises(NotFoundError) as info:
            client.get_job("missing")
        assert info.value.code == "NOT_FOUND" and info.value.correlation_id
    finally:
        server.stop()


def test_client_rate_limited_over_http(clock: ManualClock):
    server = start(clock, rate_limit_per_s=1, rate_limit_burst=2)
    try:
        client = GeonodeClient(
            KEY, base_url=server.base_url, clock=clock, retry=RetryPolicy(max_attempts=1)
        )
        client.list_jobs()
        client.list_jobs()  # the burst of two is spent; the clock does not move
        with pytest.raises(RateLimitedError) as info:
            client.list_jobs()
        assert info.value.retry_after is not None and info.value.retry_after >= 1
        # with retries, the client waits Retry-After on the (manual) clock and gets through
        patient = GeonodeClient(KEY, base_url=server.base_url, clock=clock, rng=random.Random(2))
        assert patient.list_jobs().items == []
        assert clock.sleeps and max(clock.sleeps) >= 1
    finally:
        server.stop()


def test_client_server_error_burst_retried_for_reads(server: SimulatorServer, client: AdminClient):
    server.sim.faults.burst(count=2, status=503)
    assert client.list_jobs().items == []
    assert client.requests_sent == 3
    server.sim.faults.burst(count=1, status=502)
    with pytest.raises(ServerError):
        client.submit_extract("https://example.com/never-twice")
    assert server.sim.submissions().get("https://example.com/never-twice", 0) == 0


def test_client_lost_answer_after_the_job_was_created(server: SimulatorServer, client: AdminClient):
    # GIVEN the simulator told to lose the next POST's answer after carrying it out
    url = "https://example.com/answer-lost"
    server.sim.faults.lose_answers("POST /v1/extract", [504])
    # WHEN the client submits: it sees a 5xx, is not retried (the API may have acted)
    with pytest.raises(ServerError):
        client.submit_extract(url)
    # THEN the job exists all the same, once, and the job list names it by url
    assert server.sim.submissions()[url] == 1
    [truth] = server.sim.truth_jobs("extract")
    assert truth["url"] == url


def test_lost_answers_at_a_rate_are_logged_with_the_job_they_made(
    server: SimulatorServer, client: AdminClient
):
    # GIVEN the simulator told to lose every job-creating POST's answer (504 only)
    server.sim.faults.lose_answers_at(1.0, (504,))
    urls = [f"https://example.com/rate-lost/{i}" for i in range(3)]
    # WHEN the client submits an extract job and a batch: each answer is lost
    with pytest.raises(ServerError):
        client.submit_extract(urls[0])
    with pytest.raises(ServerError):
        client.create_batch(urls[1:])
    server.sim.faults.lose_answers_at(0.0)
    answered = client.submit_extract("https://example.com/rate-lost/answered")
    # THEN each job exists once, and the log names it, its URLs and its first POST
    jobs = {j["url"]: j["job_id"] for j in server.sim.truth_jobs("extract")}
    lost = server.sim.faults.lost_answers()
    assert [(x.route, x.urls, x.first_post) for x in lost] == [
        ("POST /v1/extract", (urls[0],), True),
        ("POST /v1/batch", tuple(urls[1:]), True),
    ]
    assert lost[0].job_id == jobs[urls[0]]
    assert lost[1].job_id is not None and lost[1].job_id != answered.job_id
    assert all(server.sim.submissions()[url] == 1 for url in urls)


def test_client_payment_required_when_the_balance_runs_out(clock: ManualClock):
    server = start(clock, balance_tokens=2)
    try:
        client = GeonodeClient(KEY, base_url=server.base_url, clock=clock)
        client.submit_extract("https://example.com/paid/0")
        # a batch the balance cannot cover creates nothing
        with pytest.raises(PaymentRequiredError):
            client.create_batch(["https://example.com/paid/1", "https://example.com/paid/2"])
        client.submit_extract("https://example.com/paid/3")
        with pytest.raises(PaymentRequiredError) as info:
            client.submit_extract("https://example.com/paid/4")
        assert info.value.status_code == 402 and info.value.attempts == 1
        server.sim.top_up(KEY, 1)
        client.submit_extract("https://example.com/paid/4")
        assert set(server.sim.submissions()) == {f"https://example.com/paid/{i}" for i in (0, 3, 4)}
    finally:
        server.stop()
