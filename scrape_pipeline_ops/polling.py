"""Polling one job: the seed article's loop done right (full jitter, hard deadline, 404 grace).

Good for a handful of jobs; for many, ``ManyJobsPoller`` costs list pages, not jobs x polls.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import GeonodeError, NotFoundError, RateLimitedError
from scrape_pipeline.geonode.models import Job


class JobTimeoutError(GeonodeError):
    """A poller's deadline passed with the job (or jobs) still unsettled."""

    def __init__(self, job_ids: Sequence[str], waited: float) -> None:
        shown = ", ".join(list(job_ids)[:5]) + (" ..." if len(job_ids) > 5 else "")
        super().__init__(f"{len(job_ids)} job(s) not settled after {waited:.1f}s: {shown}")
        self.job_ids = list(job_ids)
        self.waited = waited


@dataclass(frozen=True)
class PollSchedule:
    """When to ask again: waits uniform in [0, delay], delay doubling up to ``max_delay``."""

    initial_delay: float = 1.0
    max_delay: float = 30.0
    max_wait: float = 300.0
    # Right after a submission a read replica may not know the job yet (geonode-api.md).
    not_found_grace: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_delay <= self.max_delay:
            raise ValueError("need 0 < initial_delay <= max_delay")
        if self.max_wait <= 0:
            raise ValueError("max_wait must be positive")
        if self.not_found_grace < 0:
            raise ValueError("not_found_grace cannot be negative")


def poll_job(
    client: GeonodeClient,
    job_id: str,
    *,
    schedule: PollSchedule | None = None,
    submitted_at: float | None = None,
    clock: Clock = SYSTEM_CLOCK,
    rng: random.Random | None = None,
) -> Job:
    """Wait until ``job_id`` is completed, failed or cancelled, and return it.

    Raises ``JobTimeoutError`` after ``max_wait``; a 404 past the grace window, or any other
    API error the client could not retry, propagates.
    """
    schedule = schedule or PollSchedule()
    rng = rng or random.Random()  # jitter only, not security
    started = clock.monotonic()
    deadline = started + schedule.max_wait
    submitted = clock.time() if submitted_at is None else submitted_at
    grace_until = submitted + schedule.not_found_grace
    delay = schedule.initial_delay
    while True:
        wait: float | None = None
        try:
            job = client.get_job(job_id)
        except RateLimitedError as exc:
            wait = exc.retry_after
        except NotFoundError:
            if clock.time() > grace_until:
                raise
        else:
            if job.is_terminal:
                return job
        jitter = rng.uniform(0.0, delay)
        delay = min(delay * 2, schedule.max_delay)
        wait = jitter if wait is None else max(wait, jitter)
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            raise JobTimeoutError([job_id], clock.monotonic() - started)
        # One last look exactly at the deadline rather than giving up early.
        clock.sleep(min(wait, remaining))
