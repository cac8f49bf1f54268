"""The in-process simulator: accounts, jobs, batches, crawls, webhooks, faults and truth.

Every draw comes from a generator seeded by (config.seed, url, nth submission of that url), so
a job's id, timing and outcome do not depend on what other requests ran concurrently.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import zlib
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from scrape_pipeline_local.simulator import content, draws, views
from scrape_pipeline_local.simulator.clocks import Clock, OffsetClock, real_clock
from scrape_pipeline_local.simulator.config import SimConfig
from scrape_pipeline_local.simulator.errors import ApiError
from scrape_pipeline_local.simulator.faults import Faults
from scrape_pipeline_local.simulator.ratelimit import TokenBucketLimiter
from scrape_pipeline_local.simulator.seeding import rng_for, stable_uuid, uuid_from
from scrape_pipeline_local.simulator.state import (
    TERMINAL,
    Account,
    Batch,
    Crawl,
    ExtractJob,
    Outcome,
    Work,
)
from scrape_pipeline_local.simulator.stats import RequestStats
from scrape_pipeline_local.simulator.subscriptions import SubscriptionStore
from scrape_pipeline_local.simulator.webhooks import WebhookDispatcher

Json = dict[str, Any]  # JSON-ready; Any so callers can index truth rows freely


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Filters of ``GET /v1/extract/jobs``; dates are epoch seconds, bounds inclusive."""

    job_id: str | None = None
    url: str | None = None
    status: str | None = None
    output: str | None = None
    start: float | None = None
    end: float | None = None


@dataclass(slots=True)
class _Record:
    kind: str  # extract | batch_item | crawl_page
    account: str
    job_id: str
    index: int
    mode: str
    work: Work


class Simulator:
    """The Geonode Scraper API's behaviour, without HTTP; ``create_app`` puts HTTP in front.

    ``clock`` is any object with ``time() -> float``; to run the API faster than real time,
    pass ``scrape_pipeline_local.clock.ScaledClock(scale)`` rather than a setting here.
    """

    def __init__(self, config: SimConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or SimConfig()
        self.clock = clock or real_clock()
        if self.config.api_clock_offset_s:
            self.clock = OffsetClock(self.clock, self.config.api_clock_offset_s)
        self.lock = threading.RLock()
        self.faults = Faults(self.config.faults, self.config.seed, self.clock)
        self.limiter = TokenBucketLimiter(
            self.config.rate_limit_per_s, self.config.rate_limit_burst
        )
        self.stats = RequestStats()
        self.subscriptions = SubscriptionStore(self.config, self.clock, self.lock)
        self.webhooks = WebhookDispatcher(
            self.config,
            clock=self.clock,
            faults=self.faults,
            lock=self.lock,
            subscriptions=self.subscriptions,
            render=self._event_data,
        )
        self._correlation = itertools.count(1)
        self._reset_state()

    def _reset_state(self) -> None:
        self._accounts = {key: Account(key) for key in self.config.api_keys}
        # API key -> the account it opens (an account keeps its first key as its name).
        self._keys = {key: key for key in self.config.api_keys}
        self._submissions: Counter[str] = Counter()
        self._batch_counts: Counter[str] = Counter()
        self._records: list[_Record] = []
        self._listings: list[Json] = []
        self._began = self.clock.time()  # where a ramping listing lag starts
        self._balances: dict[str, int | None] = dict.fromkeys(
            self.config.api_keys, self.config.balance_tokens
        )

    def reset(self) -> None:
        """Forget everything: jobs, webhooks, deliveries, counters, faults, rate buckets."""
        with self.lock:
            self._reset_state()
            self.subscriptions.reset()
            self.webhooks.reset()
        self.faults.reset()
        self.limiter.reset()
        self.stats.reset()

    # -------------------------------------------------------------- gateway

    def new_correlation_id(self) -> str:
        return stable_uuid(self.config.seed, "correlation", next(self._correlation))

    def admit(self, api_key: str | None, route: str | None = None) -> ApiError | None:
        """Why an API request is refused before routing (fault, auth, rate limit), or None."""
        fault = self.faults.api_fault(route)
        if fault is not None:
            error = ApiError.for_status(fault, "injected fault")
            if fault == 429:
                error.headers["Retry-After"] = "1"
            return error
        account = self.account_of(api_key)
        if account is None:
            return ApiError("UNAUTHORIZED", "missing or invalid X-Api-Key")
        wait = self.limiter.acquire(account, self.clock.time())
        if wait:
            return ApiError(
                "RATE_LIMITED", "request rate limit reached", headers={"Retry-After": str(wait)}
            )
        return None

    def account_of(self, api_key: str | None) -> str | None:
        """The account ``api_key`` opens, or None (missing, invalid or revoked)."""
        with self.lock:
            return self._keys.get(api_key) if api_key is not None else None

    def rotate_api_key(self, old: str, new: str) -> None:
        """The account ``old`` opens is opened by ``new`` from now on; ``old`` answers 401."""
        with self.lock:
            account = self._keys.pop(old)
            self._keys[new] = account

    # ------------------------------------------------------------- balance

    def _charge(self, account: str, urls: int) -> None:
        """Draw the tokens of ``urls`` new jobs from the balance; 402 when it cannot cover them.

        The caller holds the lock, so a refused POST creates nothing.
        """
        balance = self._balances.get(account)
        if balance is None:
            return
        cost = urls * self.config.tokens_per_page
        if cost > balance:
            raise ApiError("PAYMENT_REQUIRED", f"balance exhausted: {balance} token(s) left")
        self._balances[account] = balance - cost

    def top_up(self, account: str, tokens: int | None) -> int | None:
        """Add ``tokens`` to the account's balance (None: unlimited from now); the new balance."""
        with self.lock:
            balance = self._balances.get(account)
            new = None if tokens is None or balance is None else balance + tokens
            self._balances[account] = new
            return new

    def balance(self, account: str) -> int | None:
        """Tokens left (None: unlimited)."""
        with self.lock:
            return self._balances.get(account)

    # ------------------------------------------------------------- extract

    def _draw(
        self, url: str, formats: tuple[str, ...], render_js: bool, now: float, *, item: bool = False
    ) -> tuple[str, Work]:
        """The nth submission of ``url``: same id, timing and outcome whichever route sent it
        (``item``: a batch's, drawn at the items' retryable failure rate)."""
        self._submissions[url] += 1
        rng = rng_for(self.config.seed, "job", url, self._submissions[url])
        job_id = uuid_from(rng)
        config = self._item_config if item else self.config
        return job_id, draws.job_work(
            rng, config=config, url=url, formats=formats, render_js=render_js, now=now
        )

    @property
    def _item_config(self) -> SimConfig:
        """The configuration batch items and crawl pages are drawn with."""
        return replace(self.config, retryable_failure_rate=self.config.item_retryable_rate)

    def submit_extract(
        self,
        account: str,
        url: str,
        formats: tuple[str, ...] = ("markdown",),
        render_js: bool = False,
        processing_mode: str = "async",
    ) -> ExtractJob:
        """A new extract job. Sync jobs are settled at once and kept for truth queries only."""
        with self.lock:
            self._charge(account, 1)
            now = self.clock.time()
            job_id, work = self._draw(url, formats, render_js, now)
            job = ExtractJob(job_id, account, processing_mode, work)
            self._records.append(_Record("extract", account, job_id, 0, processing_mode, work))
            if processing_mode == "sync":
                return job
            owner = self._accounts[account]
            owner.jobs.append(job)
            owner.jobs_by_id[job_id] = job
            self.webhooks.expect("extract_completed", account, job_id, work.settle_at)
            return job

    def get_extract(self, account: str, job_id: str) -> ExtractJob:
        """The job, or 404 if unknown, another account's, or still inside the replica-lag window."""
        with self.lock:
            job = self._accounts[account].jobs_by_id.get(job_id)
        if job is None or self.clock.time() < job.work.created_at + self.config.not_found_lag_s:
            raise ApiError("NOT_FOUND", f"job {job_id} not found")
        return job

    def list_extract(
        self, account: str, filters: JobFilter, page: int = 1, page_size: int = 100
    ) -> tuple[list[ExtractJob], int]:
        """One page of the account's async extract jobs, newest first, and the matching total."""
        now = self.clock.time()
        visible_before = now - self.config.not_found_lag_s
        lagging = self.config.listing_lag_max_s > 0
        matches: list[ExtractJob] = []
        with self.lock:
            owner = self._accounts[account]
            if filters.job_id is not None:
                found = owner.jobs_by_id.get(filters.job_id)
                candidates = [found] if found is not None else []
            else:
                candidates = owner.jobs
            for job in reversed(candidates):
                work = job.work
                if work.created_at > visible_before:
                    continue  # replica lag: too new to be listed
                if lagging and work.created_at + self.listing_lag(job) > now:
                    continue  # listing lag: not in the list yet
                if filters.start is not None and work.created_at < filters.start:
                    break  # creation order: everything further is older still
                if filters.end is not None and work.created_at > filters.end:
                    continue
                if filters.url is not None and work.url != filters.url:
                    continue
                if filters.output is not None and filters.output not in work.formats:
                    continue
                if filters.status is not None and work.status(now) != filters.status:
                    continue
                matches.append(job)
        start = (page - 1) * page_size
        answered = matches[start : start + page_size]
        with self.lock:
            self._listings.append(
                {
                    "account": account,
                    "status": filters.status,
                    "start": filters.start,
                    "end": filters.end,
                    "page": page,
                    "page_size": page_size,
                    "job_ids": [job.job_id for job in answered],
                }
            )
        return answered, len(matches)

    def listing_lag(self, job: ExtractJob) -> float:
        """How long after its creation ``job`` appears in the job list (drawn from its id, and
        scaled down while the lag ramps up)."""
        low, high = self.config.listing_lag_min_s, self.config.listing_lag_max_s
        lag = low + (high - low) * (zlib.crc32(job.job_id.encode()) / 0xFFFFFFFF)
        ramp = self.config.listing_lag_ramp_s
        if ramp:
            lag *= min(1.0, max(0.0, job.work.created_at - self._began) / ramp)
        return lag

    def add_background_jobs(
        self, account: str, count: int, *, age_s: float, processing_share: float = 0.5
    ) -> list[str]:
        """``count`` async extract jobs created ``age_s`` ago that never settle: a busy account.

        Cheap (no request, no webhook, no truth record: they are nobody's workload). The first
        ``processing_share`` of them are processing, the rest queued. Returns their ids.
        """
        with self.lock:
            now = self.clock.time()
            created = now - age_s
            never = now + 10 * 365 * 86_400.0
            owner = self._accounts[account]
            started = round(count * processing_share)
            jobs = []
            for index in range(count):
                work = Work(
                    url=f"https://background.example/{index}",
                    formats=("markdown",),
                    render_js=False,
                    created_at=created,
                    started_at=created if index < started else never,
                    settle_at=never,
                    outcome=Outcome(status="completed"),
                    tokens=1,
                )
                job_id = stable_uuid(self.config.seed, "background", account, index)
                jobs.append(ExtractJob(job_id, account, "async", work))
                owner.jobs_by_id[job_id] = jobs[-1]
            # The list scans jobs in creation order: keep it sorted (a stable sort).
            owner.jobs = sorted([*owner.jobs, *jobs], key=lambda job: job.work.created_at)
            return [job.job_id for job in jobs]

    def cancel_extract(self, job_id: str) -> ExtractJob:
        """Cancel an unsettled async job (a fault-control hook: the API has no such route)."""
        with self.lock:
            job = next(
                (a.jobs_by_id[job_id] for a in self._accounts.values() if job_id in a.jobs_by_id),
                None,
            )
            if job is None:
                raise ApiError("NOT_FOUND", f"job {job_id} not found")
            now = self.clock.time()
            if job.work.status(now) in TERMINAL:
                raise ApiError("CONFLICT", f"job {job_id} is already {job.work.status(now)}")
            job.work.cancel(now)
            self.webhooks.expect("extract_completed", job.account, job_id, now)
            return job

    # --------------------------------------------------------------- batch

    def submit_batch(
        self, account: str, urls: list[str], formats: tuple[str, ...], render_js: bool
    ) -> Batch:
        """A batch of the valid URLs among ``urls`` (the others are counted in invalid_urls)."""
        valid = [(index, url) for index, url in enumerate(urls) if content.is_http_url(url)]
        if not valid:
            raise ApiError("VALIDATION_ERROR", "no valid URL in the batch")
        digest = hashlib.sha256("\n".join(urls).encode()).hexdigest()
        with self.lock:
            self._charge(account, len(valid))
            now = self.clock.time()
            self._batch_counts[digest] += 1
            batch_id = stable_uuid(self.config.seed, "batch", digest, self._batch_counts[digest])
            items = []
            for index, url in valid:
                _, work = self._draw(url, formats, render_js, now, item=True)
                items.append((index, work))
                self._records.append(_Record("batch_item", account, batch_id, index, "async", work))
            batch = Batch(batch_id, account, now, items, invalid_urls=len(urls) - len(valid))
            self._accounts[account].batches[batch_id] = batch
            self.webhooks.expect("batch_completed", account, batch_id, batch.settle_at)
            return batch

    def get_batch(self, account: str, batch_id: str) -> Batch:
        batch = self._accounts[account].batches.get(batch_id)
        if batch is None:
            raise ApiError("NOT_FOUND", f"batch {batch_id} not found")
        return batch

    def cancel_batch(self, batch_id: str) -> tuple[Batch, int]:
        """Cancel a batch's items not yet started; running ones drain (a fault-control hook:
        the API has no such route). 409 once the batch is terminal."""
        with self.lock:
            batch = next(
                (a.batches[batch_id] for a in self._accounts.values() if batch_id in a.batches),
                None,
            )
            if batch is None:
                raise ApiError("NOT_FOUND", f"batch {batch_id} not found")
            now = self.clock.time()
            status = batch.status(now)
            if status in TERMINAL:
                raise ApiError("CONFLICT", f"cancel not allowed: batch is {status}")
            in_flight = _cancel_unstarted([work for _, work in batch.items], now)
            batch.cancelled_at = now
            # batch_completed goes out once the in-flight items have drained.
            self.webhooks.expect("batch_completed", batch.account, batch_id, batch.settle_at)
            return batch, in_flight

    # --------------------------------------------------------------- crawl

    def submit_crawl(
        self,
        account: str,
        url: str,
        max_pages: int | None = None,
        formats: tuple[str, ...] = ("markdown",),
        render_js: bool = False,
    ) -> Crawl:
        """A crawl of the pages reachable from ``url`` (at most ``max_pages``, in BFS order)."""
        limit = max_pages or self.config.crawl_default_max_pages
        if limit > self.config.crawl_max_pages_cap:
            raise ApiError("VALIDATION_ERROR", f"max_pages above {self.config.crawl_max_pages_cap}")
        urls = content.crawl_order(url, limit)
        with self.lock:
            self._charge(account, 1)
            now = self.clock.time()
            self._submissions[url] += 1
            rng = rng_for(self.config.seed, "crawl", url, self._submissions[url])
            crawl_id = uuid_from(rng)
            config = self._item_config
            pages = draws.crawl_works(
                rng, config=config, urls=urls, formats=formats, render_js=render_js, now=now
            )
            crawl = Crawl(
                crawl_id, account, now, url, pages, settle_at=max(p.settle_at for p in pages)
            )
            for index, work in enumerate(pages):
                self._records.append(_Record("crawl_page", account, crawl_id, index, "async", work))
            self._accounts[account].crawls[crawl_id] = crawl
            self.webhooks.expect("crawl_completed", account, crawl_id, crawl.settle_at)
            return crawl

    def get_crawl(self, account: str, crawl_id: str) -> Crawl:
        crawl = self._accounts[account].crawls.get(crawl_id)
        if crawl is None:
            raise ApiError("NOT_FOUND", f"crawl {crawl_id} not found")
        return crawl

    def cancel_crawl(self, account: str, crawl_id: str) -> tuple[Crawl, int]:
        """Cancel pages not yet started; in-flight ones drain. 409 once the crawl is terminal."""
        with self.lock:
            crawl = self.get_crawl(account, crawl_id)
            now = self.clock.time()
            status = crawl.status(now)
            if status in TERMINAL:
                raise ApiError("CONFLICT", f"cancel not allowed: crawl is {status}")
            in_flight = _cancel_unstarted(crawl.pages, now)
            crawl.cancelled_at = now
            crawl.settle_at = max([now, *(p.settle_at for p in crawl.pages)])
            # crawl_completed goes out once the in-flight pages have drained.
            self.webhooks.expect("crawl_completed", account, crawl_id, crawl.settle_at)
            return crawl, in_flight

    # ------------------------------------------------------------ webhooks

    def _event_data(self, event_type: str, account: str, job_id: str) -> Json:
        """An event's ``data``: the job as GET shows it, or a batch/crawl summary."""
        now = self.clock.time()
        owner = self._accounts[account]
        if event_type == "extract_completed":
            return views.extract_job(owner.jobs_by_id[job_id], now)
        if event_type == "batch_completed":
            return views.batch_summary(owner.batches[job_id], now)
        return views.crawl_summary(owner.crawls[job_id], now)

    def start(self) -> None:
        """Start the background webhook dispatcher."""
        self.webhooks.start()

    def close(self) -> None:
        """Stop the dispatcher and its HTTP client."""
        self.webhooks.close()

    def pump(self, timeout: float = 30.0) -> int:
        """Send every webhook attempt due now and wait for all in flight; return how many."""
        return self.webhooks.pump(timeout)

    def drain(self, timeout: float = 10.0) -> bool:
        """Pump until nothing is due at the current clock time; False if ``timeout`` ran out."""
        return self.webhooks.drain(timeout)

    def next_due(self) -> float | None:
        """Clock time at which the next webhook settlement or attempt falls due."""
        return self.webhooks.next_due()

    def set_webhook_active(self, webhook_id: str, active: bool) -> None:
        """Disable or enable a subscription of any account (fault control)."""
        self.subscriptions.update(None, webhook_id, {"is_active": active})

    # --------------------------------------------------------------- truth

    def truth_jobs(self, kind: str | None = None, account: str | None = None) -> list[Json]:
        """Every extract job, batch item and crawl page: drawn outcome and times (epoch seconds)."""
        now = self.clock.time()
        with self.lock:
            records = [
                r
                for r in self._records
                if (kind is None or r.kind == kind) and (account is None or r.account == account)
            ]
            return [
                {
                    "kind": r.kind,
                    "account": r.account,
                    "job_id": r.job_id,
                    "index": r.index,
                    "processing_mode": r.mode,
                    "url": r.work.url,
                    "created_at": r.work.created_at,
                    "started_at": r.work.started_at,
                    "settled_at": r.work.settle_at,
                    "final_status": r.work.outcome.status,
                    "status": r.work.status(now),
                    "error_code": r.work.outcome.error_code,
                    "retryable": r.work.outcome.retryable,
                    "formats": list(r.work.formats),
                    "render_js": r.work.render_js,
                    "content_bytes": r.work.content_bytes,
                }
                for r in records
            ]

    def submissions(self) -> dict[str, int]:
        """How many times each URL was submitted, across extract, batch and crawl."""
        with self.lock:
            return dict(self._submissions)

    def delivery_attempts(self) -> list[Json]:
        """Every webhook attempt made, in the order they began."""
        return [views.truth_attempt(a) for a in self.webhooks.attempts()]

    def webhook_events(self) -> list[Json]:
        """Every event owed to a subscription, including those the drop fault lost."""
        return [views.truth_event(e) for e in self.webhooks.events()]

    def list_requests(self) -> list[Json]:
        """Every job-list page answered, in order: its filters, page and the job ids it held."""
        with self.lock:
            return [dict(entry) for entry in self._listings]

    def request_counts(self) -> Json:
        """API request counts by key, route and status."""
        return self.stats.snapshot()


def _cancel_unstarted(works: list[Work], now: float) -> int:
    """Cancel the work not started yet; the count still running, which drains (its pending
    counter falls as each item settles)."""
    in_flight = 0
    for work in works:
        if work.started_at > now:
            work.cancel(now)
        elif now < work.settle_at:
            in_flight += 1
    return in_flight
