"""Result sizes: a heavy tail drawn per job, carried whole by GET and by the webhook."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from scrape_pipeline_local.simulator import SimConfig, SimulatorServer, content, draws
from scrape_pipeline_local.simulator.seeding import rng_for
from scrape_pipeline_local.simulator.state import Work
from tests.simulator.conftest import Receiver

DRAWS = 5000
KB, MB = 1000, 1_000_000
HEAVY = {"content_size": "lognormal", "job_duration_min_s": 2, "job_duration_max_s": 2}


def sizes(config: SimConfig, n: int = DRAWS) -> list[int]:
    """``n`` sizes, each from its own job's generator, as the simulator draws them."""
    return sorted(
        draws.content_bytes(rng_for(config.seed, "job", f"https://s.example/{i}", 1), config)
        for i in range(n)
    )


def test_content_size_lognormal_has_the_promised_shape():
    # GIVEN the heavy-tailed model with its default parameters
    drawn = sizes(SimConfig(content_size="lognormal"))
    # THEN the median is tens of KB, p99 1-2 MB, the tail reaches several MB, and the cap holds
    median, p99 = drawn[DRAWS // 2], drawn[int(DRAWS * 0.99)]
    assert 30 * KB <= median <= 70 * KB, median
    assert 1 * MB <= p99 <= 2.5 * MB, p99
    assert 3 * MB <= drawn[-1] <= 8 * 1024 * 1024, drawn[-1]


def test_content_size_cap_stops_the_tail():
    # GIVEN a cap inside the tail
    cap = 512 * 1024
    drawn = sizes(SimConfig(content_size="lognormal", content_size_max_bytes=cap))
    # THEN every draw beyond it is the cap, and only the tail is touched
    assert drawn[-1] == cap
    assert 0 < drawn.count(cap) < DRAWS // 10


def test_content_size_is_reproducible_and_leaves_other_draws_alone():
    # GIVEN the same job drawn with the model off and on
    def work(model: str) -> Work:
        config = SimConfig(seed=5, content_size=model)  # type: ignore[arg-type]
        rng = rng_for(5, "job", "https://s.example/x", 1)
        return draws.job_work(
            rng, config=config, url="https://s.example/x", formats=("markdown",), render_js=False,
            now=0.0,
        )  # fmt: skip

    off, on, again = work("natural"), work("lognormal"), work("lognormal")
    # THEN the size is the same every time, and timing and outcome do not move
    assert off.content_bytes == 0
    assert on.content_bytes == again.content_bytes > 0
    assert (on.settle_at, on.outcome) == (off.settle_at, off.outcome)


def test_content_size_natural_is_the_default():
    assert SimConfig().content_size == "natural"
    with pytest.raises(ValueError, match="content_size"):
        SimConfig(content_size="uniform")  # type: ignore[arg-type]


def test_content_sized_page_is_exact_cheap_and_keeps_its_links():
    url = "https://s.example/p/3"
    # WHEN a page is grown to 8 MiB per format
    started = time.perf_counter()
    data = content.extract(url, ("markdown", "html", "links"), 8 * 1024 * 1024)
    took = time.perf_counter() - started
    # THEN each text format has exactly that many bytes, built by repetition in milliseconds
    assert len(str(data["markdown"]).encode()) == len(str(data["html"]).encode()) == 8 * 1024 * 1024
    assert took < 1.0, took
    # AND it is the same page: same title, text and links, and the same on every call
    natural = content.page(url)
    assert str(data["markdown"]).startswith(f"# {natural.title}\n\n{natural.body}")
    assert data["links"] == list(natural.links)
    assert data == content.extract(url, ("markdown", "html", "links"), 8 * 1024 * 1024)
    # AND a size below the page's own text keeps the natural page
    assert content.extract(url, ("markdown",), 10) == content.extract(url, ("markdown",))


def test_content_size_reaches_get_and_webhook_whole(
    make_server: Callable[..., SimulatorServer],
    make_client: Callable[..., httpx.Client],
    receiver: Receiver,
    settle: Callable[[SimulatorServer, float], None],
):
    # GIVEN the heavy tail, with a median of 2 MB so this job's page is large
    server = make_server(**HEAVY, content_size_median_bytes=2 * MB, content_size_sigma=0.0)
    api = make_client(server)
    api.post("/v1/webhooks", json={"url": receiver.url, "event_type": "extract_completed"})
    job_id = api.post(
        "/v1/extract", json={"url": "https://s.example/big", "processing_mode": "async"}
    ).json()["job_id"]
    # WHEN the job completes and its webhook is sent
    settle(server, 2)
    # THEN the truth, GET and the webhook's data agree on the multi-MB page
    (truth,) = server.sim.truth_jobs("extract")
    assert truth["content_bytes"] == 2 * MB
    got = api.get(f"/v1/extract/{job_id}").json()["data"]["markdown"]
    assert len(got.encode()) == 2 * MB
    (delivery,) = receiver.requests
    assert len(delivery.body) > 2 * MB
    assert delivery.json()["data"]["data"]["markdown"] == got


def test_content_size_delivery_answered_413_is_a_failed_attempt_and_retried(
    make_server: Callable[..., SimulatorServer],
    make_client: Callable[..., httpx.Client],
    receiver: Receiver,
    settle: Callable[[SimulatorServer, float], None],
):
    # GIVEN a large page and a front that refuses it (as API Gateway answers over its limit)
    server = make_server(
        **HEAVY, content_size_median_bytes=MB, content_size_sigma=0.0,
        webhook_retry_schedule_s=(0, 5), webhook_jitter=0.0,
    )  # fmt: skip
    api = make_client(server)
    hook = api.post(
        "/v1/webhooks", json={"url": receiver.url, "event_type": "extract_completed"}
    ).json()
    api.post("/v1/extract", json={"url": "https://s.example/too-big", "processing_mode": "async"})
    receiver.default_status = 413
    # WHEN the first attempt and its retry are both refused
    settle(server, 2)
    settle(server, 5)
    # THEN the delivery log shows a failed attempt with 413, then the retry abandoned
    rows = api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
    by_attempt = sorted((r["attempt_number"], r["status"], r["http_status"]) for r in rows)
    assert by_attempt == [(1, "failed", 413), (2, "abandoned", 413)]
    assert len(receiver.requests) == 2
