"""Extract jobs: lifecycle, replica-lag 404, outcomes, sync mode, account isolation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

OTHER_KEY = "sim-key-2"


def _submit(api: httpx.Client, url: str = "https://example.com/a", **extra: Any) -> Any:
    body = {"url": url, "processing_mode": "async", **extra}
    response = api.post("/v1/extract", json=body)
    assert response.status_code == 202, response.text
    return response.json()


def test_extract_async_lifecycle_goes_queued_processing_completed(make_server, make_client, clock):
    # GIVEN jobs that take exactly 10 s, queued for the first 2.5 s
    server = make_server(job_duration_min_s=10, job_duration_max_s=10, queued_fraction=0.25)
    api = make_client(server)
    # WHEN a job is submitted
    accepted = _submit(api)
    job_id = accepted["job_id"]
    # THEN the 202 has the contract's shape
    assert accepted == {
        "job_id": job_id,
        "status": "queued",
        "status_url": f"/v1/extract/{job_id}",
        "estimated_tokens": 1,
    }
    clock.advance(1)
    job = api.get(accepted["status_url"]).json()
    assert job["status"] == "queued"
    assert job["data"] is None and job["completed_at"] is None and job["tokens_charged"] == 0
    clock.advance(2)
    assert api.get(accepted["status_url"]).json()["status"] == "processing"
    clock.advance(7)
    job = api.get(accepted["status_url"]).json()
    assert job["status"] == "completed"
    assert job["data"]["markdown"].startswith("# ")
    assert job["error"] is None
    assert job["tokens_charged"] == 1
    assert job["metadata"]["url"] == "https://example.com/a"
    assert job["metadata"]["duration_ms"] == 7500
    assert job["metadata"]["http_status"] == 200
    assert job["completed_at"].endswith("Z")
    # AND a terminal status never changes again
    clock.advance(10_000)
    assert api.get(accepted["status_url"]).json() == job


def test_extract_get_answers_404_during_lag_window(make_server, make_client, clock):
    server = make_server(not_found_lag_s=2.0)
    api = make_client(server)
    job_id = _submit(api)["job_id"]
    clock.advance(1.99)
    lagging = api.get(f"/v1/extract/{job_id}")
    clock.advance(0.01)
    visible = api.get(f"/v1/extract/{job_id}")
    assert lagging.status_code == 404
    assert lagging.json()["code"] == "NOT_FOUND"
    assert visible.status_code == 200


def test_extract_retryable_failure_has_error_and_no_data(make_server, make_client, clock):
    server = make_server(retryable_failure_rate=1.0)
    api = make_client(server)
    job_id = _submit(api)["job_id"]
    clock.advance(25)
    job = api.get(f"/v1/extract/{job_id}").json()
    assert job["status"] == "failed"
    assert job["data"] is None
    assert job["tokens_charged"] == 0
    assert job["error"] == {
        "code": "UPSTREAM_TIMEOUT",
        "message": job["error"]["message"],
        "retryable": True,
        "details": {},
    }


def test_extract_permanent_failure_is_not_retryable(make_server, make_client, clock):
    server = make_server(permanent_failure_rate=1.0)
    api = make_client(server)
    job_id = _submit(api)["job_id"]
    clock.advance(25)
    error = api.get(f"/v1/extract/{job_id}").json()["error"]
    assert error["code"] == "TARGET_BLOCKED"
    assert error["retryable"] is False


def test_extract_sync_answers_data_at_once(api):
    response = api.post(
        "/v1/extract",
        json={
            "url": "https://example.com/s",
            "formats": ["html", "links"],
            "processing_mode": "sync",
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body["data"]) == {"html", "links"}
    assert body["data"]["html"].startswith("<html>")
    assert all(link.startswith("https://example.com/") for link in body["data"]["links"])
    assert body["metadata"]["processing_mode"] == "sync"
    assert body["tokens_charged"] == 1


def test_extract_sync_failure_answers_422_error_body(make_server, make_client):
    api = make_client(make_server(permanent_failure_rate=1.0))
    response = api.post("/v1/extract", json={"url": "https://x.org/", "processing_mode": "sync"})
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "TARGET_BLOCKED"
    assert body["retryable"] is False
    assert body["correlation_id"] == response.headers["X-Correlation-Id"]


def test_extract_job_is_invisible_to_another_account(server, make_client, clock):
    job_id = _submit(make_client(server))["job_id"]
    clock.advance(1)
    other = make_client(server, OTHER_KEY)
    assert other.get(f"/v1/extract/{job_id}").status_code == 404


def test_extract_content_is_deterministic_per_url(api, clock):
    first = _submit(api, "https://example.com/same")["job_id"]
    second = _submit(api, "https://example.com/same")["job_id"]
    clock.advance(25)
    one = api.get(f"/v1/extract/{first}").json()["data"]
    two = api.get(f"/v1/extract/{second}").json()["data"]
    assert first != second
    assert one == two


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.com/"},
        {"url": "not a url"},
        {"url": "https://example.com/", "formats": ["pdf"]},
        {"url": "https://example.com/", "formats": []},
        {"url": "https://example.com/", "processing_mode": "later"},
        {},
    ],
)
def test_extract_invalid_body_answers_422_detail_shape(api, body):
    response = api.post("/v1/extract", json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail and {"loc", "msg", "type"} <= set(detail[0])
    assert response.headers["X-Correlation-Id"]
