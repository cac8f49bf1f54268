"""Drawing a unit of work's timing and outcome from a seeded generator."""

from __future__ import annotations

import math
import random

from scrape_pipeline_local.simulator.config import SimConfig
from scrape_pipeline_local.simulator.state import Outcome, Work

_MESSAGES = {
    "retryable": "The target did not answer in time; submitting again may succeed.",
    "permanent": "The target refused the request; submitting again will not help.",
}


def duration(rng: random.Random, low: float, high: float, distribution: str = "uniform") -> float:
    """A duration within [low, high]: uniform, or exponential with mean at the midpoint."""
    if distribution == "exponential":
        return min(high, low + rng.expovariate(2.0 / max(high - low, 1e-9)))
    return rng.uniform(low, high)


def outcome(rng: random.Random, config: SimConfig) -> Outcome:
    """Completed, or failed retryably or permanently, at the configured rates."""
    roll = rng.random()
    if roll < config.retryable_failure_rate:
        return Outcome(
            status="failed",
            http_status=504,
            error_code=config.retryable_error_code,
            error_message=_MESSAGES["retryable"],
            retryable=True,
            retry_count=2,
        )
    if roll < config.retryable_failure_rate + config.permanent_failure_rate:
        return Outcome(
            status="failed",
            http_status=403,
            error_code=config.permanent_error_code,
            error_message=_MESSAGES["permanent"],
            retryable=False,
        )
    return Outcome(status="completed", http_status=200, retry_count=int(rng.random() < 0.1))


def content_bytes(rng: random.Random, config: SimConfig) -> int:
    """Size of the work's page per text format; 0 (no draw at all) under the natural model.

    Nothing is drawn when the model is off, and the size is a job's last draw, so turning the
    model on leaves its duration and outcome as they were.
    """
    if config.content_size == "natural":
        return 0
    drawn = rng.lognormvariate(
        math.log(config.content_size_median_bytes), config.content_size_sigma
    )
    return min(config.content_size_max_bytes, max(1, round(drawn)))


def long_tail_seconds(rng: random.Random, config: SimConfig) -> float:
    """Extra running time for the long tail of jobs; 0, with no draw, when the tail is off.

    Drawn after everything else, so switching the tail on changes no other draw of the job.
    """
    if config.long_job_rate <= 0:
        return 0.0
    if rng.random() >= config.long_job_rate:
        return 0.0
    return rng.uniform(config.long_job_min_s, config.long_job_max_s)


def job_work(
    rng: random.Random,
    *,
    config: SimConfig,
    url: str,
    formats: tuple[str, ...],
    render_js: bool,
    now: float,
) -> Work:
    """An extract job or batch item: queued for a share of its duration, then processing."""
    total = duration(
        rng, config.job_duration_min_s, config.job_duration_max_s, config.job_duration_distribution
    )
    drawn = outcome(rng, config)
    size = content_bytes(rng, config)
    total += long_tail_seconds(rng, config)
    return Work(
        url=url,
        formats=formats,
        render_js=render_js,
        created_at=now,
        started_at=now + total * config.queued_fraction,
        settle_at=now + total,
        outcome=drawn,
        tokens=config.tokens_per_page,
        content_bytes=size,
    )


def crawl_works(
    rng: random.Random,
    *,
    config: SimConfig,
    urls: list[str],
    formats: tuple[str, ...],
    render_js: bool,
    now: float,
) -> list[Work]:
    """Crawl pages timed by ``crawl_concurrency`` workers taking pages in discovery order."""
    free_at = [now] * config.crawl_concurrency
    works = []
    for url in urls:
        worker = min(range(len(free_at)), key=free_at.__getitem__)
        start = free_at[worker]
        took = duration(rng, config.crawl_page_duration_min_s, config.crawl_page_duration_max_s)
        drawn = outcome(rng, config)
        size = content_bytes(rng, config)
        took += long_tail_seconds(rng, config)
        free_at[worker] = start + took
        works.append(
            Work(
                url=url,
                formats=formats,
                render_js=render_js,
                created_at=now,
                started_at=start,
                settle_at=start + took,
                outcome=drawn,
                tokens=config.tokens_per_page,
                content_bytes=size,
            )
        )
    return works
