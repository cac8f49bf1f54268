"""GET /v1/extract/jobs: newest first, filters, paging, limits, the ``items`` variant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from scrape_pipeline_local.clock import ManualClock

OTHER_KEY = "sim-key-2"
KEY = "sim-key-1"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _submit_many(
    api: httpx.Client,
    clock: ManualClock,
    count: int,
    url: Callable[[int], str] = lambda i: f"https://example.com/{i}",
    **extra: Any,
) -> list[str]:
    ids = []
    for index in range(count):
        body = {"url": url(index), "processing_mode": "async", **extra}
        ids.append(api.post("/v1/extract", json=body).json()["job_id"])
        clock.advance(1)
    return ids


def test_job_list_is_newest_first_and_pages_cover_everything(api, clock):
    # GIVEN 25 jobs submitted one second apart
    ids = _submit_many(api, clock, 25)
    # WHEN the list is read 10 at a time
    pages = [
        api.get("/v1/extract/jobs", params={"page": p, "page_size": 10}).json() for p in (1, 2, 3)
    ]
    # THEN the pages hold every job once, newest first
    listed = [job["job_id"] for page in pages for job in page["jobs"]]
    assert listed == list(reversed(ids))
    assert [len(page["jobs"]) for page in pages] == [10, 10, 5]
    assert {(page["page_count"], page["total"], page["page_size"]) for page in pages} == {
        (3, 25, 10)
    }
    assert set(pages[0]["jobs"][0]) == {
        "job_id",
        "status",
        "url",
        "created_at",
        "execution_time",
        "output",
    }


def test_job_list_default_page_size_is_100(api, clock):
    _submit_many(api, clock, 3)
    body = api.get("/v1/extract/jobs").json()
    assert body["page_size"] == 100
    assert body["page"] == 1
    assert len(body["jobs"]) == 3


def test_job_list_page_size_above_100_answers_422(api):
    response = api.get("/v1/extract/jobs", params={"page_size": 101})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "page_size"]


def test_job_list_filters_by_url_job_id_and_output(api, clock):
    ids = _submit_many(api, clock, 6, url=lambda i: f"https://example.com/{i % 2}")
    html_id = api.post(
        "/v1/extract",
        json={"url": "https://h.com/", "formats": ["html"], "processing_mode": "async"},
    ).json()["job_id"]
    clock.advance(1)
    by_url = api.get("/v1/extract/jobs", params={"url": "https://example.com/1"}).json()
    by_id = api.get("/v1/extract/jobs", params={"job_id": ids[2]}).json()
    by_output = api.get("/v1/extract/jobs", params={"output": "html"}).json()
    assert [job["job_id"] for job in by_url["jobs"]] == [ids[5], ids[3], ids[1]]
    assert [job["job_id"] for job in by_id["jobs"]] == [ids[2]]
    assert [job["job_id"] for job in by_output["jobs"]] == [html_id]
    assert by_output["jobs"][0]["output"] == "html"


def test_job_list_filters_by_status(make_server, make_client, clock):
    # GIVEN jobs of exactly 10 s: the first settles while the second is still running
    api = make_client(make_server(job_duration_min_s=10, job_duration_max_s=10))
    done = _submit_many(api, clock, 1)[0]
    clock.advance(8)
    running = _submit_many(api, clock, 1)[0]
    completed = api.get("/v1/extract/jobs", params={"status": "completed"}).json()
    pending = api.get("/v1/extract/jobs", params={"status": "queued"}).json()
    assert [job["job_id"] for job in completed["jobs"]] == [done]
    assert completed["jobs"][0]["execution_time"] == 10.0
    assert [job["job_id"] for job in pending["jobs"]] == [running]
    assert pending["jobs"][0]["execution_time"] is None


def test_job_list_filters_by_created_at_range(api, clock):
    start = clock.time()
    ids = _submit_many(api, clock, 10)
    window = {"start_date": _iso(start + 3), "end_date": _iso(start + 6)}
    body = api.get("/v1/extract/jobs", params=window).json()
    assert [job["job_id"] for job in body["jobs"]] == [ids[6], ids[5], ids[4], ids[3]]


def test_job_list_bad_date_answers_422(api):
    response = api.get("/v1/extract/jobs", params={"start_date": "yesterday"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "start_date"]


def test_job_list_can_name_its_field_items(make_server, make_client, clock):
    api = make_client(make_server(job_list_field="items"))
    ids = _submit_many(api, clock, 2)
    body = api.get("/v1/extract/jobs").json()
    assert "jobs" not in body
    assert [job["job_id"] for job in body["items"]] == list(reversed(ids))


def test_job_list_holds_only_own_async_extract_jobs(server, make_client, clock):
    mine, theirs = make_client(server), make_client(server, OTHER_KEY)
    own = _submit_many(mine, clock, 2)
    _submit_many(theirs, clock, 3)
    mine.post("/v1/extract", json={"url": "https://s.com/", "processing_mode": "sync"})
    mine.post("/v1/batch", json={"urls": ["https://b.com/1"]})
    clock.advance(1)
    body = mine.get("/v1/extract/jobs").json()
    assert [job["job_id"] for job in body["jobs"]] == list(reversed(own))
    assert body["total"] == 2


def test_job_list_hides_jobs_inside_the_lag_window(make_server, make_client, clock):
    api = make_client(make_server(not_found_lag_s=5))
    api.post("/v1/extract", json={"url": "https://l.com/", "processing_mode": "async"})
    assert api.get("/v1/extract/jobs").json()["total"] == 0
    clock.advance(5)
    assert api.get("/v1/extract/jobs").json()["total"] == 1


def test_job_list_shows_a_job_only_after_its_listing_lag(make_server, make_client, clock):
    # GIVEN an API that lists every job 300 s after its created_at
    api = make_client(make_server(listing_lag_min_s=300.0, listing_lag_max_s=300.0))
    ids = _submit_many(api, clock, 3)
    # WHEN the list is read before and after the lag
    before = api.get("/v1/extract/jobs").json()["jobs"]
    clock.advance(300)
    after = api.get("/v1/extract/jobs").json()["jobs"]
    # THEN the jobs were missing from it, then listed
    assert before == []
    assert [job["job_id"] for job in after] == ids[::-1]


def test_job_list_lag_ramps_up_from_none(make_server, make_client, clock):
    # GIVEN an API whose listing lag (300 s) grows over 600 s from the simulator's start
    api = make_client(
        make_server(listing_lag_min_s=300.0, listing_lag_max_s=300.0, listing_lag_ramp_s=600.0)
    )
    (first,) = _submit_many(api, clock, 1)  # created 0 s in: listed at once
    clock.advance(299)
    (middle,) = _submit_many(api, clock, 1)  # created 300 s in: listed 150 s late
    # WHEN the list is read as the lag of the second one runs out
    listed = [[job["job_id"] for job in api.get("/v1/extract/jobs").json()["jobs"]]]
    clock.advance(148)
    listed.append([job["job_id"] for job in api.get("/v1/extract/jobs").json()["jobs"]])
    clock.advance(2)
    listed.append([job["job_id"] for job in api.get("/v1/extract/jobs").json()["jobs"]])
    # THEN the first was listed from the start, the second only after its ramped lag
    assert listed == [[first], [first], [middle, first]]


def test_api_clock_offset_shifts_every_time_it_shows(make_server, make_client, clock):
    # GIVEN an API whose clock is two minutes behind its caller's
    api = make_client(make_server(api_clock_offset_s=-120.0))
    (job_id,) = _submit_many(api, clock, 1)
    # THEN the job's created_at is on the API's clock
    created = api.get(f"/v1/extract/{job_id}").json()["created_at"]
    shown = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    assert shown == pytest.approx(clock.time() - 1 - 120.0, abs=0.001)  # submitted 1 s ago


def test_background_jobs_fill_the_unsettled_list_cheaply(make_server, make_client, clock):
    # GIVEN 1,000 background jobs two days old, half of them processing
    server = make_server()
    api = make_client(server)
    server.sim.add_background_jobs(KEY, 1000, age_s=2 * 86_400.0)
    # THEN the unsettled list shows them by status, and a list by creation time of the last
    # day does not
    for status in ("queued", "processing"):
        listing = api.get("/v1/extract/jobs", params={"status": status}).json()
        assert (listing["total"], listing["page_count"]) == (500, 5)
    recent = api.get("/v1/extract/jobs", params={"start_date": _iso(clock.time() - 86_400)})
    assert recent.json()["jobs"] == []
