"""The API client's retry rules and error reading, against httpx.MockTransport (no network)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    APIError,
    AuthError,
    ConflictError,
    MissingAPIKeyError,
    NotFoundError,
    PaymentRequiredError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from scrape_pipeline.geonode.models import ApiStatus
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline_local.clock import ManualClock

API_KEY = "test-key-c0ffee-do-not-leak"
Handler = Callable[[httpx.Request], httpx.Response]


def make_client(handler: Handler, clock: ManualClock, **kwargs) -> GeonodeClient:
    kwargs.setdefault(
        "retry", RetryPolicy(max_attempts=5, base_delay=0.5, max_delay=4, deadline=30)
    )
    return GeonodeClient(
        API_KEY,
        base_url="http://geonode.test",
        clock=clock,
        rng=random.Random(7),
        transport=httpx.MockTransport(handler),
        **kwargs,
    )


def scripted(*steps: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler answering each request with the next step; the last step repeats."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        step = steps[min(len(seen) - 1, len(steps) - 1)]
        if isinstance(step, Exception):
            raise step
        return step

    return handler, seen


JOB = {
    "job_id": "j1",
    "status": "completed",
    "data": {"markdown": "# hi"},
    "metadata": {"url": "https://a.example"},
}


def err(status: int, code: str = "X", retryable: bool = False, **headers: str) -> httpx.Response:
    body = {"code": code, "message": "m", "correlation_id": "c-1", "retryable": retryable}
    return httpx.Response(status, json=body, headers=headers)


def test_client_get_retries_5xx_then_succeeds():
    clock = ManualClock()
    handler, seen = scripted(err(503, retryable=True), err(502), httpx.Response(200, json=JOB))
    client = make_client(handler, clock)

    job = client.get_job("j1")

    assert job.status == "completed" and job.data["markdown"] == "# hi"
    assert len(seen) == 3
    assert client.requests_sent == 3
    assert len(clock.sleeps) == 2
    # full jitter: each wait lies within its doubling ceiling
    assert 0 <= clock.sleeps[0] <= 0.5 and 0 <= clock.sleeps[1] <= 1.0


def test_client_get_retries_network_errors():
    clock = ManualClock()
    handler, seen = scripted(httpx.ReadTimeout("slow"), httpx.Response(200, json=JOB))
    assert make_client(handler, clock).get_job("j1").job_id == "j1"
    assert len(seen) == 2


def test_client_sends_api_key_header():
    handler, seen = scripted(httpx.Response(200, json=JOB))
    make_client(handler, ManualClock()).get_job("j1")
    assert seen[0].headers["X-Api-Key"] == API_KEY


def test_client_post_not_retried_after_timeout():
    # GIVEN a submission whose answer timed out: the API may have created the job
    handler, seen = scripted(httpx.ReadTimeout("slow"), httpx.Response(202, json={"job_id": "j"}))
    client = make_client(handler, ManualClock())
    # WHEN it is submitted THEN it is not sent twice
    with pytest.raises(TransportError) as info:
        client.submit_extract("https://a.example")
    assert info.value.request_sent is True
    assert len(seen) == 1


def test_client_post_not_retried_on_5xx():
    handler, seen = scripted(err(503, retryable=True), httpx.Response(202, json={"job_id": "j"}))
    with pytest.raises(ServerError):
        make_client(handler, ManualClock()).create_batch(["https://a.example"])
    assert len(seen) == 1


def test_client_post_retried_when_connection_refused():
    handler, seen = scripted(
        httpx.ConnectError("refused"), httpx.Response(202, json={"job_id": "j"})
    )
    submitted = make_client(handler, ManualClock()).submit_extract("https://a.example")
    assert submitted.job_id == "j"
    assert len(seen) == 2
    assert json.loads(seen[1].content)["processing_mode"] == "async"


def test_client_post_retried_on_429_after_retry_after():
    clock = ManualClock()
    handler, seen = scripted(
        err(429, "RATE_LIMITED", True, **{"Retry-After": "7"}),
        httpx.Response(202, json={"job_id": "j"}),
    )
    make_client(handler, clock).submit_extract("https://a.example")
    assert len(seen) == 2
    assert clock.sleeps == [7.0]


def test_client_retry_after_http_date():
    clock = ManualClock(start=datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    when = format_datetime(datetime(2026, 1, 1, 0, 0, 12, tzinfo=UTC), usegmt=True)
    handler, _ = scripted(
        err(429, "RATE_LIMITED", True, **{"Retry-After": when}), httpx.Response(200, json=JOB)
    )
    make_client(handler, clock).get_job("j1")
    assert clock.sleeps == [12.0]


def test_client_gives_up_at_deadline_with_last_error():
    clock = ManualClock()
    handler, seen = scripted(err(503, "BUSY", True))
    client = make_client(
        handler, clock, retry=RetryPolicy(max_attempts=100, base_delay=1, max_delay=8, deadline=20)
    )
    with pytest.raises(ServerError) as info:
        client.get_job("j1")
    assert sum(clock.sleeps) <= 20
    assert info.value.attempts == len(seen) > 2
    assert info.value.code == "BUSY"


def test_client_gives_up_at_max_attempts():
    handler, seen = scripted(httpx.ConnectError("refused"))
    client = make_client(handler, ManualClock(), retry=RetryPolicy(max_attempts=3, deadline=1000))
    with pytest.raises(TransportError):
        client.get_job("j1")
    assert len(seen) == 3


def test_client_retry_after_beyond_deadline_raises_rate_limited():
    clock = ManualClock()
    handler, seen = scripted(err(429, "RATE_LIMITED", True, **{"Retry-After": "120"}))
    with pytest.raises(RateLimitedError) as info:
        make_client(handler, clock).get_job("j1")
    assert info.value.retry_after == 120.0
    assert len(seen) == 1 and clock.sleeps == []


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, AuthError),
        (402, PaymentRequiredError),
        (404, NotFoundError),
        (409, ConflictError),
        (400, APIError),
    ],
)
def test_client_maps_status_to_error_class_without_retry(status, cls):
    handler, seen = scripted(err(status, "CODE"))
    with pytest.raises(cls) as info:
        make_client(handler, ManualClock()).get_job("j1")
    assert type(info.value) is cls
    assert info.value.status_code == status and info.value.code == "CODE"
    assert info.value.correlation_id == "c-1"
    assert len(seen) == 1


def test_client_reads_nested_error_shape():
    body = {
        "error": {
            "code": "NOT_FOUND",
            "message": "no job",
            "correlation_id": "c-9",
            "retryable": False,
        }
    }
    handler, _ = scripted(httpx.Response(404, json=body))
    with pytest.raises(NotFoundError) as info:
        make_client(handler, ManualClock()).get_job("j1")
    assert (info.value.code, info.value.message, info.value.correlation_id) == (
        "NOT_FOUND",
        "no job",
        "c-9",
    )
    assert "NOT_FOUND" in str(info.value) and "c-9" in str(info.value)


def test_client_reads_validation_detail():
    body = {"detail": [{"loc": ["body", "url"], "msg": "invalid url", "type": "value_error"}]}
    handler, _ = scripted(httpx.Response(422, json=body))
    with pytest.raises(ValidationError) as info:
        make_client(handler, ManualClock()).submit_extract("nope")
    assert info.value.detail == body["detail"]
    assert info.value.message == "body.url: invalid url"


def test_client_error_without_json_body():
    handler, _ = scripted(
        httpx.Response(502, text="<html>bad gateway</html>", headers={"X-Correlation-Id": "edge-1"})
    )
    client = make_client(handler, ManualClock(), retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ServerError) as info:
        client.get_job("j1")
    assert info.value.retryable is True and info.value.correlation_id == "edge-1"


def test_client_invalid_json_on_success_is_an_api_error():
    handler, _ = scripted(httpx.Response(200, text="not json"))
    with pytest.raises(APIError, match="INVALID_RESPONSE"):
        make_client(handler, ManualClock()).get_job("j1")


def test_client_never_shows_api_key():
    handler, _ = scripted(err(401, "UNAUTHORIZED"))
    client = make_client(handler, ManualClock())
    with pytest.raises(AuthError) as info:
        client.get_job("j1")
    assert API_KEY not in repr(client)
    assert API_KEY not in str(info.value) and API_KEY not in repr(info.value)


def test_client_key_from_environment(monkeypatch):
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", "from-env")
    handler, seen = scripted(httpx.Response(200, json=JOB))
    GeonodeClient(base_url="http://g.test", transport=httpx.MockTransport(handler)).get_job("j1")
    assert seen[0].headers["X-Api-Key"] == "from-env"


def test_client_missing_key(monkeypatch):
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="GEONODE_SCRAPER_API_KEY"):
        GeonodeClient(base_url="http://g.test")


def test_client_job_id_cannot_escape_its_path():
    handler, seen = scripted(httpx.Response(200, json=JOB))
    make_client(handler, ManualClock()).get_job("../webhooks")
    assert seen[0].url.raw_path == b"/v1/extract/..%2Fwebhooks"


def test_client_list_jobs_accepts_items_field_and_iterates_without_repeats():
    pages = {
        1: {
            "items": [{"job_id": "a", "status": "completed"}, {"job_id": "b", "status": "queued"}],
            "page": 1,
            "page_count": 2,
        },
        # a new job pushed "b" onto page 2: it must not come out twice
        2: {
            "items": [{"job_id": "b", "status": "queued"}, {"job_id": "c", "status": "failed"}],
            "page": 2,
            "page_count": 2,
        },
    }

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params["status"] == "completed"
        return httpx.Response(200, json=pages[int(request.url.params["page"])])

    client = make_client(handler, ManualClock())
    ids = [j.job_id for j in client.iter_jobs(status="completed")]
    assert ids == ["a", "b", "c"]


def test_client_date_filters_are_iso_utc():
    handler, seen = scripted(httpx.Response(200, json={"jobs": [], "page": 1, "page_count": 1}))
    make_client(handler, ManualClock()).list_jobs(
        start_date=datetime(2026, 5, 27, 8, 16, 9, tzinfo=UTC), end_date=0.0
    )
    assert seen[0].url.params["start_date"] == "2026-05-27T08:16:09Z"
    assert seen[0].url.params["end_date"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "body", [{"status": "completed", "items": []}, {"job_id": "", "items": []}]
)
def test_client_batch_answer_without_its_id_is_refused_like_a_jobs(body: dict[str, object]):
    # GIVEN an answer that does not say which batch it is (a poison answer)
    handler, _ = scripted(httpx.Response(200, json=body), httpx.Response(200, json=JOB))
    client = make_client(handler, ManualClock())
    # THEN it is refused, as an extract job's answer without job_id is
    with pytest.raises(ValueError, match="without job_id"):
        client.get_batch("b1")
    with pytest.raises(KeyError):
        make_client(
            scripted(httpx.Response(200, json={"status": "completed"}))[0], ManualClock()
        ).get_job("j1")


def test_client_connection_error_names_host_and_cause_not_the_key():
    # GIVEN an API host that refuses connections (the socket's error inside httpx's)
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    refused.__context__ = ConnectionRefusedError(111, "Connection refused")
    handler, _ = scripted(refused)
    client = make_client(handler, ManualClock(), retry=RetryPolicy(max_attempts=1))
    # WHEN a call fails THEN the message says where and why, and never the key
    with pytest.raises(TransportError) as info:
        client.list_webhooks()
    message = str(info.value)
    assert message == (
        "GET /v1/webhooks: cannot reach geonode.test: connection refused (ConnectError)"
    )
    assert API_KEY not in message


def test_client_read_timeout_names_host():
    handler, _ = scripted(httpx.ReadTimeout("timed out"))
    client = make_client(handler, ManualClock(), retry=RetryPolicy(max_attempts=1))
    with pytest.raises(TransportError, match=r"geonode\.test: no answer in time \(ReadTimeout\)"):
        client.get_job("j1")


def test_client_connect_attempts_bound_a_refused_connection_only():
    # GIVEN a client allowed 2 tries of a connection that cannot be made, 5 of anything else
    policy = RetryPolicy(max_attempts=5, deadline=1000, connect_attempts=2)
    refused, seen_refused = scripted(httpx.ConnectError("refused"))
    slow, seen_slow = scripted(httpx.ReadTimeout("slow"))
    # WHEN each fails every time
    for handler in (refused, slow):
        with pytest.raises(TransportError):
            make_client(handler, ManualClock(), retry=policy).get_job("j1")
    # THEN the refused connection gave up after 2 tries, the slow answer after 5
    assert (len(seen_refused), len(seen_slow)) == (2, 5)


def test_client_connect_timeout_is_its_own_or_the_whole_timeout():
    handler, _ = scripted(httpx.Response(200, json=JOB))
    default = make_client(handler, ManualClock())
    short = make_client(handler, ManualClock(), connect_timeout=5.0)
    assert default._http.timeout == httpx.Timeout(30.0)  # GEONODE_TIMEOUT_SECONDS' default
    assert short._http.timeout == httpx.Timeout(30.0, connect=5.0)


# -- a rotated key: read anew on a 401 -------------------------------------------------------


def test_client_401_sends_the_request_again_with_the_renewed_key():
    # GIVEN an API that accepts only the rotated key, and a key source that has it
    handler, seen = scripted(err(401, "UNAUTHORIZED"), httpx.Response(200, json=JOB))
    renewals: list[str] = []

    def renew() -> str:
        renewals.append("read")
        return "rotated-key"

    client = make_client(handler, ManualClock(), refresh_key=renew)
    # WHEN a POST (never retried after an answer) and then a GET are sent
    client.submit_extract("https://a.example")
    client.get_job("j1")
    # THEN the refused POST went once more with the new key, and the new key stays
    assert [r.headers["X-Api-Key"] for r in seen] == [API_KEY, "rotated-key", "rotated-key"]
    assert renewals == ["read"]


@pytest.mark.parametrize("renewed", [None, API_KEY, "another-wrong-key"])
def test_client_401_with_no_other_key_raises_after_one_renewal_at_most(renewed: str | None):
    # GIVEN an API refusing every key, and a source with nothing new, the same key, or a
    # new key that is wrong too
    handler, seen = scripted(err(401, "UNAUTHORIZED"))
    client = make_client(handler, ManualClock(), refresh_key=lambda: renewed)
    # WHEN a GET is sent
    with pytest.raises(AuthError):
        client.get_job("j1")
    # THEN it is not retried with the same key, and a wrong new key is tried once only
    assert len(seen) == (2 if renewed == "another-wrong-key" else 1)


# --- the API's status vocabulary ---------------------------------------------------------------


@pytest.mark.parametrize("status", ["queued", "processing", "completed", "failed", "cancelled"])
def test_client_reads_each_known_status_as_api_status(status: str):
    # GIVEN the API answering a job, a job-list row, a batch and its item in that status
    batch = {"job_id": "b1", "status": status, "items": [{"input_index": 0, "status": status}]}
    listing = {"jobs": [{"job_id": "j1", "status": status}], "page": 1, "page_count": 1}
    answers = {
        "/v1/extract/j1": {**JOB, "status": status},
        "/v1/extract/jobs": listing,
        "/v1/batch/b1": batch,
    }
    handler = lambda request: httpx.Response(200, json=answers[request.url.path])  # noqa: E731
    client = make_client(handler, ManualClock())
    # WHEN each is read
    job = client.get_job("j1")
    row = client.list_jobs().items[0]
    got = client.get_batch("b1")
    # THEN every status is the enum member, equal to the bare string the rest of the code uses
    for value in (job.status, row.status, got.status, got.page.items[0].status):
        assert value is ApiStatus(status) and value == status
    terminal = status in ("completed", "failed", "cancelled")
    assert job.is_terminal is row.is_terminal is got.is_terminal is terminal


@pytest.mark.parametrize("status", ["paused", "COMPLETED", "", None, 3])
def test_client_keeps_an_unknown_status_as_written_and_never_terminal(status: object):
    # GIVEN a status outside the published set (a newer API, a partial answer)
    batch = {"job_id": "b1", "status": status, "items": [{"status": status}]}
    answers = {"/v1/extract/j1": {**JOB, "status": status}, "/v1/batch/b1": batch}
    handler = lambda request: httpx.Response(200, json=answers[request.url.path])  # noqa: E731
    client = make_client(handler, ManualClock())
    # WHEN it is read THEN nothing raises, the text is kept as the API wrote it, and the job
    # counts as not settled (looked at again), as before the status had a type
    job, got = client.get_job("j1"), client.get_batch("b1")
    for value in (job.status, got.status, got.page.items[0].status):
        assert value == str(status) and not isinstance(value, ApiStatus)
    assert not job.is_terminal and not got.is_terminal and not got.page.items[0].is_terminal


def test_client_submitted_job_without_status_is_queued():
    handler, _ = scripted(httpx.Response(202, json={"job_id": "j9"}))
    submitted = make_client(handler, ManualClock()).submit_extract("https://a.example")
    assert submitted.status is ApiStatus.QUEUED


# --- the status-to-error table, edges ------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [(403, AuthError, False), (422, ValidationError, False), (408, APIError, True)]
    + [(s, ServerError, s in (500, 502, 503, 504)) for s in (500, 501, 502, 503, 504, 599)],
)
def test_client_error_class_and_default_retryable_follow_the_status(status, cls, retryable):
    # GIVEN an error answer whose body says nothing of retrying
    handler, _ = scripted(httpx.Response(status, json={"code": "C", "message": "m"}))
    client = make_client(handler, ManualClock(), retry=RetryPolicy(max_attempts=1))
    with pytest.raises(APIError) as info:
        client.get_job("j1")
    # THEN the class comes from the status, and so does whether it is transient
    assert type(info.value) is cls and info.value.retryable is retryable


def test_client_reads_a_string_detail_and_the_request_id_header():
    # GIVEN FastAPI's plain-string detail and only an X-Request-Id to correlate by
    response = httpx.Response(404, json={"detail": "Not Found"}, headers={"X-Request-Id": "r-7"})
    handler, _ = scripted(response)
    with pytest.raises(NotFoundError) as info:
        make_client(handler, ManualClock()).get_job("j1")
    # THEN the detail is the message, the header the correlation id, and no code is invented
    assert (info.value.code, info.value.message, info.value.correlation_id) == (
        None,
        "Not Found",
        "r-7",
    )


def test_client_body_retryable_overrides_the_status_and_long_messages_are_cut():
    body = {"code": "BUSY", "message": "x" * 900, "retryable": True}
    handler, _ = scripted(httpx.Response(400, json=body))
    client = make_client(handler, ManualClock(), retry=RetryPolicy(max_attempts=1))
    with pytest.raises(APIError) as info:
        client.get_job("j1")
    assert info.value.retryable is True and info.value.message == "x" * 500
