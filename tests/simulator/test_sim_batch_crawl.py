"""Batches and crawls: counters, paging, validation, crawl cancel and 409 on terminal."""

from __future__ import annotations

import pytest

from scrape_pipeline_local.simulator.config import FaultSettings


def _urls(count: int, host: str = "https://b.com") -> list[str]:
    return [f"{host}/{index}" for index in range(count)]


def test_batch_pages_keep_input_index_and_counters_add_up(make_server, make_client, clock):
    # GIVEN a batch of 25 valid URLs with 2 invalid ones among them, some of which fail
    api = make_client(make_server(retryable_failure_rate=0.3))
    urls = _urls(25)
    urls[3:3] = ["ftp://nope"]
    urls.append("not a url")
    accepted = api.post("/v1/batch", json={"urls": urls, "ignore_invalid_urls": True})
    assert accepted.status_code == 202
    body = accepted.json()
    assert (body["status"], body["total_urls"], body["invalid_urls"]) == ("queued", 25, 2)
    # WHEN it is read page by page before and after every item settled
    first = api.get(body["status_url"]).json()
    clock.advance(25)
    pages = [
        api.get(body["status_url"], params={"page": page, "page_size": 10}).json()
        for page in (1, 2, 3)
    ]
    # THEN items keep their input index, counters add up, and the batch completes
    assert first["status"] == "queued" and first["pending_urls"] == 25
    assert first["completed_at"] is None
    assert first["token_summary"] == {"tokens_charged_total": 0, "tokens_reserved": 25}
    items = [item for page in pages for item in page["items"]]
    assert [item["input_index"] for item in items] == [
        i for i, u in enumerate(urls) if "//b.com" in u
    ]
    assert [item["url"] for item in items] == [u for u in urls if "//b.com" in u]
    last = pages[-1]
    assert last["status"] == "completed" and last["completed_at"]
    assert last["page_count"] == 3 and len(last["items"]) == 5
    assert last["completed_urls"] + last["failed_urls"] == 25
    assert 0 < last["failed_urls"] < 25
    assert (last["pending_urls"], last["cancelled_urls"], last["invalid_urls"]) == (0, 0, 2)
    assert last["token_summary"] == {
        "tokens_charged_total": last["completed_urls"],
        "tokens_reserved": 0,
    }
    failed = [item for item in items if item["status"] == "failed"]
    assert {item["error_code"] for item in failed} == {"UPSTREAM_TIMEOUT"}
    assert all(item["data"] is None for item in failed)
    done = next(item for item in items if item["status"] == "completed")
    assert done["data"]["markdown"]
    assert set(done["metadata"]) == {"http_status", "duration_ms", "retry_count", "tokens_charged"}


def test_batch_status_goes_processing_while_items_run(make_server, make_client, clock):
    api = make_client(make_server(job_duration_min_s=2, job_duration_max_s=20))
    status_url = api.post("/v1/batch", json={"urls": _urls(20)}).json()["status_url"]
    clock.advance(5)
    body = api.get(status_url, params={"page_size": 50}).json()
    assert body["status"] == "processing"
    assert 0 < body["pending_urls"] < 20
    assert body["completed_urls"] == sum(i["status"] == "completed" for i in body["items"])


@pytest.mark.parametrize(
    "body",
    [
        {"urls": []},
        {"urls": _urls(1001)},
        {"urls": ["https://ok.com/", "bad"], "ignore_invalid_urls": False},
        {"urls": ["bad", "worse"]},
    ],
)
def test_batch_invalid_request_answers_422(api, body):
    response = api.post("/v1/batch", json=body)
    assert response.status_code == 422
    assert "detail" in response.json()


def test_batch_accepts_1000_urls(api):
    response = api.post("/v1/batch", json={"urls": _urls(1000)})
    assert response.status_code == 202
    assert response.json()["total_urls"] == 1000


def test_batch_page_size_is_limited_to_50(api):
    status_url = api.post("/v1/batch", json={"urls": _urls(3)}).json()["status_url"]
    assert api.get(status_url, params={"page_size": 51}).status_code == 422
    assert api.get(status_url).json()["page_size"] == 10


def test_crawl_discovers_distinct_pages_and_completes(api, clock):
    accepted = api.post("/v1/crawl", json={"url": "https://site.com/", "max_pages": 25})
    assert accepted.status_code == 202
    status_url = accepted.json()["status_url"]
    clock.advance(1000)
    pages = [api.get(status_url, params={"page": p, "page_size": 10}).json() for p in (1, 2, 3)]
    items = [item for page in pages for item in page["items"]]
    urls = [item["url"] for item in items]
    assert pages[0]["total_pages"] == 25 and pages[0]["page_count"] == 3
    assert urls[0] == "https://site.com/"
    assert len(set(urls)) == 25
    assert all(url.startswith("https://site.com/") for url in urls)
    assert [item["input_index"] for item in items] == list(range(25))
    assert pages[0]["status"] == "completed"
    assert pages[0]["completed_pages"] == 25


def test_crawl_default_max_pages_is_10(api, clock):
    status_url = api.post("/v1/crawl", json={"url": "https://site.com/"}).json()["status_url"]
    assert api.get(status_url).json()["total_pages"] == 10


def test_crawl_max_pages_above_cap_answers_422(api):
    response = api.post("/v1/crawl", json={"url": "https://site.com/", "max_pages": 501})
    assert response.status_code == 422


def test_crawl_cancel_stops_unstarted_pages_and_drains_in_flight(make_server, make_client, clock):
    # GIVEN a 30-page crawl with 4 workers and 2 s pages, 3 s in
    server = make_server(
        crawl_concurrency=4, crawl_page_duration_min_s=2, crawl_page_duration_max_s=2
    )
    api = make_client(server)
    status_url = api.post("/v1/crawl", json={"url": "https://c.com/", "max_pages": 30}).json()[
        "status_url"
    ]
    clock.advance(3)
    # WHEN it is cancelled
    cancelled = api.delete(status_url)
    after = api.get(status_url, params={"page_size": 50}).json()
    # THEN pages not started are cancelled and in-flight ones go on
    assert cancelled.status_code == 200
    assert cancelled.json() == {
        "job_id": status_url.rsplit("/", 1)[1],
        "status": "cancelled",
        "status_url": status_url,
        "in_flight_pages": 4,
    }
    assert (after["completed_pages"], after["pending_pages"], after["cancelled_pages"]) == (
        4,
        4,
        22,
    )
    assert after["status"] == "cancelled"
    assert after["completed_at"] is None
    # AND once they drain, the crawl has settled and a second cancel is refused
    clock.advance(1)
    drained = api.get(status_url).json()
    assert (drained["completed_pages"], drained["pending_pages"]) == (8, 0)
    assert drained["completed_at"] is not None
    again = api.delete(status_url)
    assert again.status_code == 409
    assert again.json()["code"] == "CONFLICT"


def test_crawl_cancel_after_completion_answers_409(api, clock):
    status_url = api.post("/v1/crawl", json={"url": "https://d.com/", "max_pages": 2}).json()[
        "status_url"
    ]
    clock.advance(100)
    response = api.delete(status_url)
    assert response.status_code == 409
    assert response.json()["retryable"] is False


def test_crawl_unknown_id_answers_404(api):
    assert api.get("/v1/crawl/nope").status_code == 404
    assert api.delete("/v1/crawl/nope").status_code == 404
    assert api.get("/v1/batch/nope").status_code == 404


def test_batch_cancel_stops_unstarted_items_and_drains_running_ones(
    make_server, make_client, clock
):
    # GIVEN a 10-URL batch whose items take 8 s each (queued for 2 s), 3 s in
    server = make_server(job_duration_min_s=8, job_duration_max_s=8, queued_fraction=0.25)
    api = make_client(server)
    status_url = api.post("/v1/batch", json={"urls": _urls(10)}).json()["status_url"]
    clock.advance(3)
    # WHEN it is cancelled (a fault-control route: the API has none)
    cancelled = api.post(f"/_sim/batch/{status_url.rsplit('/', 1)[1]}/cancel").json()
    after = api.get(status_url).json()
    # THEN it answers cancelled at once while its running items go on, counted pending
    assert cancelled["in_flight_urls"] == 10 and cancelled["status"] == "cancelled"
    assert (after["status"], after["pending_urls"], after["completed_at"]) == (
        "cancelled",
        10,
        None,
    )
    # AND once they drain they are completed and the batch is done
    clock.advance(6)
    drained = api.get(status_url).json()
    assert (drained["completed_urls"], drained["pending_urls"]) == (10, 0)
    assert drained["status"] == "cancelled" and drained["completed_at"] is not None


def test_pages_answered_without_page_under_omit_page(make_server, make_client, clock):
    server = make_server(faults=FaultSettings(omit_page=True))
    api = make_client(server)
    status_url = api.post("/v1/batch", json={"urls": _urls(12)}).json()["status_url"]
    body = api.get(status_url, params={"page": 2, "page_size": 5}).json()
    assert "page" not in body and [i["input_index"] for i in body["items"]] == [5, 6, 7, 8, 9]


def test_a_sized_host_serves_a_crawl_of_thousands_when_the_cap_allows(make_server, make_client):
    api = make_client(make_server(crawl_max_pages_cap=3000))
    url = "https://2500-pages.example.com/"
    status_url = api.post("/v1/crawl", json={"url": url, "max_pages": 2500}).json()["status_url"]
    assert api.get(status_url).json()["total_pages"] == 2500
    too_many = api.post("/v1/crawl", json={"url": url, "max_pages": 3001})
    assert too_many.status_code == 422


def test_items_retryable_failure_rate_is_chosen_apart_from_extract_jobs(
    make_server, make_client, clock
):
    # GIVEN items that fail retryably at 40 %, extract jobs that never fail
    api = make_client(
        make_server(
            retryable_failure_rate=0.0, permanent_failure_rate=0.0, item_retryable_failure_rate=0.4
        )
    )
    batch = api.post("/v1/batch", json={"urls": _urls(200)}).json()["status_url"]
    crawl = api.post("/v1/crawl", json={"url": "https://site.com/", "max_pages": 100}).json()
    extracts = [
        api.post("/v1/extract", json={"url": url, "processing_mode": "async"}).json()["status_url"]
        for url in _urls(50, "https://x.com")
    ]
    # WHEN every one settles
    clock.advance(600)
    items = [
        item
        for page in (1, 2, 3, 4)
        for item in api.get(batch, params={"page": page, "page_size": 50}).json()["items"]
    ]
    pages = [
        item
        for page in (1, 2)
        for item in api.get(crawl["status_url"], params={"page": page, "page_size": 50}).json()[
            "items"
        ]
    ]
    # THEN about 40 % of the items and pages failed retryably, and no extract job failed
    for settled in (items, pages):
        failed = [item for item in settled if item["status"] == "failed"]
        assert {item["error_code"] for item in failed} == {"UPSTREAM_TIMEOUT"}
        assert 0.25 < len(failed) / len(settled) < 0.55
    assert {api.get(url).json()["status"] for url in extracts} == {"completed"}
