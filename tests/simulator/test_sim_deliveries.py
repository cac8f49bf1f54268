"""Webhook deliveries: envelope, signatures, retries, abandonment, the log, and faults."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import socket
from typing import Any

import httpx
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_local.simulator.config import DEFAULT_RETRY_SCHEDULE_S

FIXED = {"job_duration_min_s": 2, "job_duration_max_s": 2}  # every job settles 2 s after submit


def _subscribe(api: httpx.Client, url: str, event_type: str = "extract_completed") -> Any:
    response = api.post("/v1/webhooks", json={"url": url, "event_type": event_type})
    assert response.status_code == 201
    return response.json()


def _submit(api: httpx.Client, url: str = "https://example.com/a") -> str:
    body = {"url": url, "processing_mode": "async"}
    return str(api.post("/v1/extract", json=body).json()["job_id"])


def _run_to_quiet(server: SimulatorServer, clock: ManualClock, max_steps: int = 50) -> None:
    """Advance a ManualClock from due time to due time until nothing is left to send."""
    for _ in range(max_steps):
        due = server.sim.next_due()
        if due is None:
            return
        clock.advance(max(due - clock.time(), 0))
        assert server.sim.drain(timeout=10)
    raise AssertionError("deliveries never went quiet")


def _hex(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def test_delivery_default_envelope_headers_and_signature(
    make_server, make_client, receiver, settle
):
    # GIVEN a subscription and a job
    server = make_server(**FIXED)
    api = make_client(server)
    hook = _subscribe(api, receiver.url)
    job_id = _submit(api)
    # WHEN the job settles
    settle(server, 2)
    # THEN one delivery arrives, shaped and signed as the contract says
    (delivery,) = receiver.requests
    envelope = delivery.json()
    assert delivery.headers["content-type"] == "application/json"
    assert delivery.headers["user-agent"] == "scraper-api-webhook/1.0"
    assert delivery.headers["x-webhook-event"] == "extract_completed"
    assert delivery.headers["x-webhook-delivery-id"] == envelope["delivery_id"]
    assert delivery.headers["x-webhook-signature"] == _hex(hook["secret"].encode(), delivery.body)
    assert set(envelope) == {"event", "webhook_id", "delivery_id", "timestamp", "data"}
    assert envelope["event"] == "extract_completed"
    assert envelope["webhook_id"] == hook["id"]
    assert envelope["timestamp"].endswith("Z")
    assert envelope["data"] == api.get(f"/v1/extract/{job_id}").json()
    assert envelope["data"]["status"] == "completed"


def test_delivery_standard_webhooks_scheme(make_server, make_client, receiver, settle, clock):
    server = make_server(signature_scheme="standard_webhooks", **FIXED)
    api = make_client(server)
    hook = _subscribe(api, receiver.url)
    _submit(api)
    settle(server, 2)
    delivery = receiver.requests[0]
    msg_id, timestamp = delivery.headers["webhook-id"], delivery.headers["webhook-timestamp"]
    key = base64.b64decode(hook["secret"].removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + delivery.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert delivery.headers["webhook-signature"].split(" ") == [f"v1,{expected}"]
    assert int(timestamp) == int(clock.time())
    assert "x-webhook-signature" not in delivery.headers


def test_delivery_stripe_scheme(make_server, make_client, receiver, settle):
    server = make_server(signature_scheme="stripe", **FIXED)
    api = make_client(server)
    hook = _subscribe(api, receiver.url)
    _submit(api)
    settle(server, 2)
    delivery = receiver.requests[0]
    parts = dict(item.split("=", 1) for item in delivery.headers["stripe-signature"].split(","))
    signed = f"{parts['t']}.".encode() + delivery.body
    assert parts["v1"] == _hex(hook["secret"].encode(), signed)


def test_delivery_github_scheme(make_server, make_client, receiver, settle):
    server = make_server(signature_scheme="github", **FIXED)
    api = make_client(server)
    hook = _subscribe(api, receiver.url)
    _submit(api)
    settle(server, 2)
    delivery = receiver.requests[0]
    assert delivery.headers["x-hub-signature-256"] == "sha256=" + _hex(
        hook["secret"].encode(), delivery.body
    )


def test_delivery_retried_until_2xx_and_logged(make_server, make_client, receiver, clock):
    # GIVEN a receiver that fails twice, then accepts
    server = make_server(webhook_time_scale=100, **FIXED)
    api = make_client(server)
    receiver.statuses = [500, 503]
    hook = _subscribe(api, receiver.url)
    job_id = _submit(api)
    # WHEN every due attempt is made
    clock.advance(2)
    _run_to_quiet(server, clock)
    # THEN there were three attempts, each with its own delivery id, the last one a success
    assert len(receiver.requests) == 3
    ids = [r.headers["x-webhook-delivery-id"] for r in receiver.requests]
    assert len(set(ids)) == 3
    assert {r.json()["data"]["job_id"] for r in receiver.requests} == {job_id}
    log = api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
    assert log["total"] == 3 and log["page_count"] == 1
    rows = log["items"]  # newest first
    assert [row["attempt_number"] for row in rows] == [3, 2, 1]
    assert [row["status"] for row in rows] == ["success", "failed", "failed"]
    assert [row["http_status"] for row in rows] == [200, 503, 500]
    assert [row["id"] for row in rows] == list(reversed(ids))
    assert all(row["job_id"] == job_id and row["event_type"] == "extract_completed" for row in rows)
    assert all(row["delivered_at"] and row["created_at"] for row in rows)


def test_delivery_log_pages_and_filters_by_status(make_server, make_client, receiver, clock):
    server = make_server(webhook_time_scale=100, **FIXED)
    api = make_client(server)
    receiver.statuses = [500, 500]
    hook = _subscribe(api, receiver.url)
    for index in range(3):
        _submit(api, f"https://example.com/{index}")
    clock.advance(2)
    _run_to_quiet(server, clock)
    url = f"/v1/webhooks/{hook['id']}/deliveries"
    pages = [api.get(url, params={"page": p, "page_size": 2}).json() for p in (1, 2, 3)]
    failed = api.get(url, params={"status": "failed"}).json()
    success = api.get(url, params={"status": "success"}).json()
    assert [len(p["items"]) for p in pages] == [2, 2, 1]
    assert {(p["page_count"], p["total"]) for p in pages} == {(3, 5)}
    assert len({row["id"] for p in pages for row in p["items"]}) == 5
    assert failed["total"] == 2 and success["total"] == 3
    assert api.get(url, params={"page_size": 101}).status_code == 422
    assert api.get(url, params={"status": "weird"}).status_code == 422


def test_delivery_abandoned_after_the_last_scheduled_attempt(
    make_server, make_client, receiver, clock
):
    # GIVEN a receiver that always fails and a schedule compressed 100 times
    scale = 100
    server = make_server(webhook_time_scale=scale, **FIXED)
    api = make_client(server)
    receiver.default_status = 500
    hook = _subscribe(api, receiver.url)
    submitted_at = clock.time()
    _submit(api)
    # WHEN the whole schedule runs
    clock.advance(2)
    _run_to_quiet(server, clock)
    # THEN there were 8 attempts spaced as the schedule says (+-20 %), the last abandoned
    attempts = sorted(server.sim.delivery_attempts(), key=lambda a: a["attempt_number"])
    assert [a["attempt_number"] for a in attempts] == list(range(1, 9))
    assert [a["status"] for a in attempts] == ["failed"] * 7 + ["abandoned"]
    assert attempts[0]["sent_at"] == submitted_at + 2  # the first attempt is immediate
    for previous, attempt in itertools.pairwise(attempts):
        nominal = DEFAULT_RETRY_SCHEDULE_S[attempt["attempt_number"] - 1] / scale
        gap = attempt["sent_at"] - previous["delivered_at"]
        assert nominal * 0.8 <= gap <= nominal * 1.2
    assert len(receiver.requests) == 8
    assert server.sim.next_due() is None
    log = api.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"status": "abandoned"}).json()
    assert [row["attempt_number"] for row in log["items"]] == [8]


def test_delivery_timeout_logs_null_http_status(make_server, make_client, receiver, settle):
    # 15 s timeout / 100 = 0.15 s; the receiver takes 0.5 s
    server = make_server(webhook_time_scale=100, **FIXED)
    api = make_client(server)
    receiver.delay_s = 0.5
    hook = _subscribe(api, receiver.url)
    _submit(api)
    settle(server, 2)
    (row,) = api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
    assert row["status"] == "failed"
    assert row["http_status"] is None
    assert server.sim.delivery_attempts()[0]["error"] == "ReadTimeout"


def test_delivery_connection_refused_is_a_failed_attempt(make_server, make_client, settle):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    server = make_server(**FIXED)
    api = make_client(server)
    _subscribe(api, f"http://127.0.0.1:{closed_port}/hook")
    _submit(api)
    settle(server, 2)
    (attempt,) = server.sim.delivery_attempts()
    assert attempt["status"] == "failed"
    assert attempt["http_status"] is None
    assert server.sim.next_due() is not None  # a retry is scheduled


def test_delivery_batch_and_crawl_events_carry_counters(make_server, make_client, receiver, settle):
    server = make_server(**FIXED, crawl_page_duration_min_s=1, crawl_page_duration_max_s=1)
    api = make_client(server)
    _subscribe(api, receiver.url, "batch_completed")
    _subscribe(api, receiver.url, "crawl_completed")
    batch_id = api.post("/v1/batch", json={"urls": ["https://a.com/", "bad"]}).json()["job_id"]
    crawl_id = api.post("/v1/crawl", json={"url": "https://c.com/", "max_pages": 3}).json()[
        "job_id"
    ]
    settle(server, 2)
    events = {r.headers["x-webhook-event"]: r.json()["data"] for r in receiver.requests}
    assert events["batch_completed"] == {
        "job_id": batch_id,
        "status": "completed",
        "created_at": events["batch_completed"]["created_at"],
        "completed_at": events["batch_completed"]["completed_at"],
        "total_urls": 1,
        "completed_urls": 1,
        "failed_urls": 0,
        "pending_urls": 0,
        "cancelled_urls": 0,
        "invalid_urls": 1,
    }
    assert events["crawl_completed"]["job_id"] == crawl_id
    assert events["crawl_completed"]["status"] == "completed"
    assert events["crawl_completed"]["completed_pages"] == 3


def test_delivery_cancelled_crawl_is_announced_after_draining(
    make_server, make_client, receiver, settle
):
    server = make_server(crawl_page_duration_min_s=2, crawl_page_duration_max_s=2)
    api = make_client(server)
    _subscribe(api, receiver.url, "crawl_completed")
    status_url = api.post("/v1/crawl", json={"url": "https://c.com/", "max_pages": 20}).json()[
        "status_url"
    ]
    settle(server, 1)
    api.delete(status_url)
    settle(server, 0.5)
    assert receiver.requests == []  # in-flight pages still draining
    settle(server, 0.5)
    (delivery,) = receiver.requests
    assert delivery.json()["data"]["status"] == "cancelled"
    assert delivery.json()["data"]["cancelled_pages"] == 16


def test_fault_drop_loses_events_without_logging_them(make_server, make_client, receiver, settle):
    server = make_server(**FIXED)
    api = make_client(server)
    server.sim.faults.update(drop_rate=0.5)
    hook = _subscribe(api, receiver.url)
    for index in range(20):
        _submit(api, f"https://example.com/{index}")
    settle(server, 2)
    events = server.sim.webhook_events()
    dropped = {e["job_id"] for e in events if e["dropped"]}
    sent = {r.json()["data"]["job_id"] for r in receiver.requests}
    assert len(events) == 20
    assert 0 < len(dropped) < 20
    assert sent.isdisjoint(dropped) and len(sent) == 20 - len(dropped)
    log = api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
    assert log["total"] == len(sent)


def test_fault_duplicate_sends_an_extra_logged_attempt(make_server, make_client, receiver, settle):
    server = make_server(**FIXED)
    api = make_client(server)
    server.sim.faults.update(duplicate_rate=1.0)
    hook = _subscribe(api, receiver.url)
    job_id = _submit(api)
    settle(server, 2)
    assert len(receiver.requests) == 2
    assert {r.json()["data"]["job_id"] for r in receiver.requests} == {job_id}
    assert len({r.headers["x-webhook-delivery-id"] for r in receiver.requests}) == 2
    rows = api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
    assert [row["status"] for row in rows] == ["success", "success"]


def test_fault_delay_holds_deliveries_back(make_server, make_client, receiver, settle):
    server = make_server(**FIXED)
    api = make_client(server)
    server.sim.faults.update(delay_min_s=100, delay_max_s=200)
    _subscribe(api, receiver.url)
    _submit(api)
    settle(server, 2 + 99)
    assert receiver.requests == []
    settle(server, 101)
    assert len(receiver.requests) == 1


def _dispatch_order(
    server: SimulatorServer, clock: ManualClock, api: httpx.Client, receiver: Any, window: float
) -> tuple[list[str], list[str]]:
    server.sim.reset()
    server.sim.faults.update(reorder_window_s=window)
    _subscribe(api, receiver.url)
    jobs = [_submit(api, f"https://example.com/{index}") for index in range(12)]
    clock.advance(60 + window)
    assert server.sim.drain(timeout=10)
    attempts = sorted(server.sim.delivery_attempts(), key=lambda a: a["dispatch_seq"])
    settled = {t["job_id"]: t["settled_at"] for t in server.sim.truth_jobs(kind="extract")}
    assert {a["job_id"] for a in attempts} == set(jobs)
    return [a["job_id"] for a in attempts], sorted(jobs, key=settled.__getitem__)


def test_fault_reorder_shuffles_the_send_order(server, api, receiver, clock):
    in_order, by_settle = _dispatch_order(server, clock, api, receiver, window=0)
    shuffled, by_settle_again = _dispatch_order(server, clock, api, receiver, window=30)
    assert in_order == by_settle
    assert shuffled != by_settle_again
    assert sorted(shuffled) == sorted(by_settle_again)


def test_disabled_subscription_receives_nothing_until_enabled(
    make_server, make_client, receiver, settle
):
    server = make_server(**FIXED)
    api = make_client(server)
    hook = _subscribe(api, receiver.url)
    api.patch(f"/v1/webhooks/{hook['id']}", json={"is_active": False})
    _submit(api, "https://example.com/off")
    settle(server, 3)
    assert receiver.requests == []
    api.patch(f"/v1/webhooks/{hook['id']}", json={"is_active": True})
    on_id = _submit(api, "https://example.com/on")
    settle(server, 3)
    assert [r.json()["data"]["job_id"] for r in receiver.requests] == [on_id]


def test_disabling_through_the_simulator_stops_pending_retries(
    make_server, make_client, receiver, clock
):
    server = make_server(webhook_time_scale=100, **FIXED)
    api = make_client(server)
    receiver.default_status = 500
    hook = _subscribe(api, receiver.url)
    _submit(api)
    clock.advance(2)
    assert server.sim.drain(timeout=10)
    server.sim.set_webhook_active(hook["id"], False)
    _run_to_quiet(server, clock)
    assert len(receiver.requests) == 1
    assert api.get(f"/v1/webhooks/{hook['id']}").json()["is_active"] is False


@pytest.mark.parametrize("event_type", ["batch_completed", "crawl_completed"])
def test_delivery_goes_only_to_matching_event_type(
    make_server, make_client, receiver, settle, event_type
):
    server = make_server(**FIXED)
    api = make_client(server)
    _subscribe(api, receiver.url, event_type)
    _submit(api)
    settle(server, 3)
    assert receiver.requests == []
