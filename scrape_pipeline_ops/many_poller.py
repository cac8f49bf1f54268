"""Polling many jobs at once without a public endpoint: learn from the job list what settled.

A per-job poller costs jobs x polls. This one lists the account's jobs created in the window
of the outstanding ones (100 a page, newest first), then fetches each settled job once, so
its cost grows with list pages, not with the number of jobs. All its requests share one
``RateBudget``.

    round:  list pages of [oldest outstanding - margin, newest + margin]
            -> ids now completed / failed / cancelled -> GET each once -> yield
            -> wait: the shortest interval after a round that found work, doubling when idle
    a job the API answers 404 for (never listed, a direct GET says 404) is asked about at every
    round and given up as unknown once ``not_found_grace`` has passed since its creation: the
    API's replica lag is seconds, so a mistyped or foreign id is not followed for max_wait.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.client import JOBS_PAGE_MAX, GeonodeClient
from scrape_pipeline.geonode.errors import (
    GeonodeError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    TransportError,
)
from scrape_pipeline.geonode.models import Job, SubmittedJob
from scrape_pipeline_ops.polling import JobTimeoutError
from scrape_pipeline_ops.ratebudget import RateBudget


@dataclass(frozen=True)
class ManyJobsSettings:
    """Cadence and budget of the many-jobs poller."""

    min_interval: float = 2.0
    max_interval: float = 30.0
    # Client and API clocks differ, and a job's created_at is the API's: widen the window.
    created_margin: float = 30.0
    requests_per_second: float = 20.0
    fetch_concurrency: int = 4
    # A job inside the window but missing from this many listings is fetched directly.
    unseen_rounds_before_direct_get: int = 3
    # A job still answered 404 this long after its creation is unknown (a wrong id, another
    # account's): the contract's 404 after a submission is replica lag, "brief" and unpublished
    # (the simulator's is 0.5 s); a minute covers it many times over.
    not_found_grace: float = 60.0

    def __post_init__(self) -> None:
        if self.not_found_grace < 0:
            raise ValueError("not_found_grace cannot be negative")
        if not 0 < self.min_interval <= self.max_interval:
            raise ValueError("need 0 < min_interval <= max_interval")
        if self.requests_per_second <= 0 or self.fetch_concurrency < 1:
            raise ValueError("requests_per_second and fetch_concurrency must be positive")


@dataclass
class _Tracked:
    created_at: float
    unseen_rounds: int = 0
    not_found: bool = False  # the last direct GET answered 404


@dataclass
class RoundStats:
    """What one round did (for tests, logs and benchmarks)."""

    list_pages: int = 0
    fetched: int = 0
    settled: list[Job] = field(default_factory=list)
    # A transient failure cut the round short; the next round starts over.
    error: GeonodeError | None = None
    retry_after: float | None = None
    # Given up: still 404 past the grace; no longer tracked.
    unknown: list[str] = field(default_factory=list)


class RoundsPoller[T]:
    """What both pollers share: the client, one rate budget, the jobs tracked (``T`` each),
    and the cadence of their rounds."""

    def __init__(
        self,
        client: GeonodeClient,
        *,
        settings: ManyJobsSettings | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        budget: RateBudget | None = None,
    ) -> None:
        self.settings = settings or ManyJobsSettings()
        self._client = client
        self._clock = clock
        self._rng = rng or random.Random()  # jitter only, not security
        self._budget = budget or RateBudget(self.settings.requests_per_second, clock=clock)
        self._jobs: dict[str, T] = {}
        self.unknown: list[str] = []  # ids given up as unknown to the API, in order

    @property
    def outstanding(self) -> list[str]:
        """Ids of the jobs not settled yet."""
        return list(self._jobs)

    def _pause(
        self,
        interval: float,
        *,
        found: bool,
        elapsed: float,
        max_wait: float,
        retry_after: float | None = None,
        grace_end: float | None = None,
    ) -> float:
        """Sleep until the next round and return its interval; ``JobTimeoutError`` once
        ``max_wait`` has passed. ``grace_end``: when a job answered 404 may be given up."""
        # Work found: jobs are settling now, look again soon. Idle: back off like a poller.
        if found:
            interval = self.settings.min_interval
        else:
            interval = min(interval * 2, self.settings.max_interval)
        if elapsed >= max_wait:
            raise JobTimeoutError(list(self._jobs), elapsed)
        wait = self._rng.uniform(0.75, 1.0) * interval
        if retry_after is not None:
            wait = max(wait, retry_after)
        if grace_end is not None:  # ask about a 404 again as soon as it may be given up
            until = grace_end - self._clock.time()
            wait = min(wait, max(until, self.settings.min_interval))
        self._clock.sleep(min(wait, max_wait - elapsed))
        return interval


class ManyJobsPoller(RoundsPoller[_Tracked]):
    """Track many async jobs and yield each exactly once when it settles."""

    def track(
        self,
        job: str | SubmittedJob,
        created_at: float | datetime | None = None,
        *,
        not_found: bool = False,
    ) -> None:
        """Follow a submitted job; ``created_at`` defaults to now (the margin absorbs skew).

        ``not_found``: a GET already answered 404, so it is asked about directly every round.
        """
        job_id = job.job_id if isinstance(job, SubmittedJob) else job
        if isinstance(created_at, datetime):
            created = created_at.timestamp()
        else:
            created = self._clock.time() if created_at is None else created_at
        self._jobs.setdefault(job_id, _Tracked(created, not_found=not_found))

    def track_all(self, jobs: Iterable[str | SubmittedJob]) -> None:
        """Follow several jobs submitted just now."""
        for job in jobs:
            self.track(job)

    def poll_once(self) -> RoundStats:
        """One round: list the window, fetch what settled, forget it."""
        stats = RoundStats()
        if not self._jobs:
            return stats
        try:
            settled_ids = self._settled_in_listing(stats)
        except (RateLimitedError, ServerError, TransportError) as exc:
            # The client already retried; give the API room and try a whole round later.
            stats.error = exc
            stats.retry_after = exc.retry_after if isinstance(exc, RateLimitedError) else None
            return stats
        for job_id, tracked in self._jobs.items():
            if job_id not in settled_ids and (
                tracked.not_found
                or tracked.unseen_rounds >= self.settings.unseen_rounds_before_direct_get
            ):
                tracked.unseen_rounds = 0
                settled_ids.append(job_id)  # fetched directly; kept if not settled
        jobs, missing = self._fetch(settled_ids)
        for job in jobs:
            stats.fetched += 1
            if job.job_id in self._jobs:
                self._jobs[job.job_id].not_found = False
            if job.is_terminal and self._jobs.pop(job.job_id, None) is not None:
                stats.settled.append(job)
        self._give_up_unknown(missing, stats)
        return stats

    def _give_up_unknown(self, missing: list[str], stats: RoundStats) -> None:
        now = self._clock.time()
        for job_id in missing:
            tracked = self._jobs.get(job_id)
            if tracked is None:
                continue
            tracked.not_found = True
            if now - tracked.created_at >= self.settings.not_found_grace:
                del self._jobs[job_id]
                stats.unknown.append(job_id)
                self.unknown.append(job_id)

    def _next_grace_end(self) -> float | None:
        """When the first job answered 404 may be given up, if any was."""
        ends = [
            t.created_at + self.settings.not_found_grace for t in self._jobs.values() if t.not_found
        ]
        return min(ends, default=None)

    def run(
        self, *, max_wait: float = 3600.0, on_unknown: Callable[[str], None] | None = None
    ) -> Iterator[Job]:
        """Yield every tracked job once, as it settles; ``JobTimeoutError`` after ``max_wait``.

        A job given up as unknown is not yielded: ``on_unknown(job_id)`` is called, and it is
        in ``unknown``.
        """
        started = self._clock.monotonic()
        interval = self.settings.min_interval
        while self._jobs:
            stats = self.poll_once()
            yield from stats.settled
            if on_unknown is not None:
                for job_id in stats.unknown:
                    on_unknown(job_id)
            if not self._jobs:
                return
            interval = self._pause(
                interval,
                found=bool(stats.settled),
                elapsed=self._clock.monotonic() - started,
                max_wait=max_wait,
                retry_after=stats.retry_after,
                grace_end=self._next_grace_end(),
            )

    def _settled_in_listing(self, stats: RoundStats) -> list[str]:
        margin = self.settings.created_margin
        created = [t.created_at for t in self._jobs.values()]
        start, end = min(created) - margin, max(created) + margin
        seen: set[str] = set()
        settled: list[str] = []
        page = 1
        while True:
            self._budget.acquire()
            listing = self._client.list_jobs(
                start_date=start, end_date=end, page=page, page_size=JOBS_PAGE_MAX
            )
            stats.list_pages += 1
            for row in listing.items:
                if row.job_id in self._jobs and row.job_id not in seen:
                    seen.add(row.job_id)
                    if row.is_terminal:
                        settled.append(row.job_id)
            # Every outstanding job found: older pages cannot hold one of ours.
            if listing.is_last or not listing.items or len(seen) == len(self._jobs):
                break
            page += 1
        for job_id, tracked in self._jobs.items():
            tracked.unseen_rounds = 0 if job_id in seen else tracked.unseen_rounds + 1
            if job_id in seen:
                tracked.not_found = False  # listed: it exists, the 404 was lag
        return settled

    def _fetch(self, job_ids: list[str]) -> tuple[list[Job], list[str]]:
        """The jobs fetched, and the ids the API answered 404 for."""

        def one(job_id: str) -> Job | str | None:
            self._budget.acquire()
            try:
                return self._client.get_job(job_id)
            except NotFoundError:
                return job_id  # not visible yet (replica lag), or unknown
            except GeonodeError:
                return None  # still tracked: the next round tries again

        if len(job_ids) <= 1 or self.settings.fetch_concurrency == 1:
            results = [one(j) for j in job_ids]
        else:
            with ThreadPoolExecutor(self.settings.fetch_concurrency) as pool:
                results = list(pool.map(one, job_ids))
        jobs = [r for r in results if isinstance(r, Job)]
        return jobs, [r for r in results if isinstance(r, str)]
