"""Auth, both error shapes, rate limiting and API fault bursts."""

from __future__ import annotations

import pytest

from scrape_pipeline_local.simulator import FaultSettings

OTHER_KEY = "sim-key-2"
ERROR_FIELDS = {"code", "message", "correlation_id", "retryable"}


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_auth_missing_or_wrong_key_answers_401(server, make_client, key):
    response = make_client(server, key).get("/v1/extract/jobs")
    assert response.status_code == 401
    body = response.json()
    assert set(body) == ERROR_FIELDS
    assert body["code"] == "UNAUTHORIZED"
    assert body["retryable"] is False
    assert body["correlation_id"] == response.headers["X-Correlation-Id"]


def test_error_shape_legacy_nests_under_error(make_server, make_client):
    server = make_server(legacy_error_shape=True)
    response = make_client(server, "wrong").get("/v1/extract/x")
    assert response.status_code == 401
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == ERROR_FIELDS
    assert body["error"]["correlation_id"] == response.headers["X-Correlation-Id"]


def test_error_shape_legacy_keeps_422_detail(make_server, make_client):
    api = make_client(make_server(legacy_error_shape=True))
    response = api.post("/v1/extract", json={"url": "ftp://x"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "url"]


def test_rate_limit_answers_429_with_retry_after_per_key(make_server, make_client, clock):
    # GIVEN a bucket of 3 refilled at 0.5 token per second
    server = make_server(rate_limit_per_s=0.5, rate_limit_burst=3)
    api, other = make_client(server), make_client(server, OTHER_KEY)
    # WHEN one key spends its burst
    statuses = [api.get("/v1/extract/jobs").status_code for _ in range(4)]
    limited = api.get("/v1/extract/jobs")
    # THEN it is throttled with a Retry-After, while another key is not
    assert statuses == [200, 200, 200, 429]
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "2"
    assert limited.json()["code"] == "RATE_LIMITED"
    assert limited.json()["retryable"] is True
    assert other.get("/v1/extract/jobs").status_code == 200
    # AND after waiting as told, the key is served again
    clock.advance(2)
    assert api.get("/v1/extract/jobs").status_code == 200
    assert api.get("/v1/extract/jobs").status_code == 429


def test_burst_answers_next_n_requests_with_the_status(server, api):
    server.sim.faults.burst(count=3, status=502)
    statuses = [api.get("/v1/extract/jobs") for _ in range(4)]
    assert [r.status_code for r in statuses] == [502, 502, 502, 200]
    assert statuses[0].json()["code"] == "BAD_GATEWAY"
    assert statuses[0].json()["retryable"] is True


def test_burst_for_a_clock_window_answers_429_with_retry_after(server, api, clock):
    server.sim.faults.burst(duration_s=10, status=429)
    during = [api.get("/v1/extract/jobs") for _ in range(3)]
    clock.advance(10)
    after = api.get("/v1/extract/jobs")
    assert {r.status_code for r in during} == {429}
    assert during[0].headers["Retry-After"] == "1"
    assert after.status_code == 200


def test_burst_hits_even_requests_without_a_key(server, make_client):
    server.sim.faults.burst(count=1, status=500)
    assert make_client(server, None).get("/v1/extract/jobs").status_code == 500
    assert make_client(server, None).get("/v1/extract/jobs").status_code == 401


def test_api_error_rate_fails_a_seeded_share_of_requests(make_server, make_client):
    server = make_server(faults=FaultSettings(api_error_rate=0.5, api_error_status=500))
    api = make_client(server)
    statuses = [api.get("/v1/extract/jobs").status_code for _ in range(40)]
    assert 5 < statuses.count(500) < 35
    assert set(statuses) == {200, 500}
