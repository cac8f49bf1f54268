"""The processor's logic: turn one job id into exactly one outcome, whatever order things came in.

    lease ─▶ GET job ─▶ completed          store each format once (S3); DONE stored
      │             ├─▶ failed, retryable  resubmit (once per job, N per URL); DONE resubmitted
      │             ├─▶ failed otherwise   dead-letter record; DONE dead_lettered
      │             ├─▶ cancelled          DONE cancelled (a crawl's finished pages stored first)
      │             ├─▶ not settled        release, retry later with a growing delay; after
      │             │                      WATCH_AFTER, or at once when the watch sweep woke
      │             │                      it, park it WATCHING (no message, no polls)
      │             ├─▶ 404                release; only 404s count toward "unknown job", and
      │             │                      only for a job nothing proves exists (its row's
      │             │                      source): a proven one is re-checked, never closed
      │             ├─▶ 5xx, network       release; retry after a backoff that grows with the
      │             │                      job's run of failed calls; at SICK_AFTER_FAILURES
      │             │                      (404s of a proven job count too) park it WATCHING:
      │             │                      the watch sweep polls it slowly, an alarm counts it
      │             └─▶ 429                release; retry after Retry-After
      ├─ any other error: release, keeping the attempt's strike and the error
      ├─ strikes past MAX_ATTEMPTS (errors, or attempts killed by a timeout): dead-letter, no call
      └─ not granted: DONE → drop the message; leased elsewhere → look again when that lease ends

It acts on the job's state as the API reports it now, never on the webhook payload. It never
sleeps: "retry later" is a ``Disposition`` with a delay, which the handler turns into an SQS
visibility change. It watches the invocation's remaining time: no job is started within
``STOP_MARGIN`` of the deadline, and no page of a batch or crawl (its GET and its S3 writes),
the first included, unless the time left also covers ``PAGE_TIME_FACTOR`` times the longest
page timed so far. A batch's or crawl's items are stored page by page with a checkpoint in
the ledger, so a large one completes across invocations without storing a page twice, and
an attempt that stored a page is progress, not a strike. A page that outlasts what is left
(one longer than any invocation, once started) stops at the stop margin after an item at
least, checkpointed at that item: the next attempt goes on from there. A page is read by
the number asked for, whatever the answer echoes. A batch or crawl is closed only once none
of its items is pending: a cancelled crawl's in-flight pages still complete, and are stored
when they do.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.budget import safety_margin
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    AuthError,
    MissingAPIKeyError,
    NotFoundError,
    PaymentRequiredError,
    RateLimitedError,
    ServerError,
    TransportError,
)
from scrape_pipeline.geonode.models import BatchStatus, Job
from scrape_pipeline.jobs import (
    PROVEN_SOURCES,
    REASON_POISON,
    REASON_UNKNOWN_JOB,
    SOURCE_WATCH,
    JobKey,
    JobKind,
    Outcome,
)
from scrape_pipeline.ledger import LeaseLostError, Ledger, LedgerRow, Streak, new_owner_id
from scrape_pipeline.queue import JobMessage
from scrape_pipeline.resubmission import Resubmitter
from scrape_pipeline.results import ResultStore, result_prefix
from scrape_pipeline.settings import FromEnv, integer, number

# SQS caps a visibility timeout at 12 h; our waits stay far below.
MAX_VISIBILITY_SECONDS = 43_200
BATCH_PAGE_SIZE = 50  # the API's largest page of batch and crawl items
# A page is started only if the time left covers the margin plus this many times the longest
# page seen: pages differ (a multi-MB item, a slow GET), and one killed mid-way is wasted.
PAGE_TIME_FACTOR = 1.5
# Errors that say nothing about the job: our key, our balance (the whole account's).
_NOT_THE_JOBS_FAULT = (AuthError, MissingAPIKeyError, PaymentRequiredError)
# A call for this job that failed without an answer about it: one more in its failed run.
_FAILED_CALL = (ServerError, TransportError)


@dataclass
class Deadline:
    """The end of the invocation as the processor sees it: seconds left, the margin kept, and
    the pages timed so far.

    Pages are timed on ``remaining`` itself (the time left before and after), so a page's
    measure and the deadline share one clock: Lambda's, or a test's fake.
    """

    remaining: Callable[[], float]
    margin: float
    # The invocation's whole length: a page longer than any invocation could hold is still
    # tried at the start of one (never starting it would loop for ever).
    length: float = math.inf
    longest_page: float = 0.0
    _page_from: float | None = field(default=None, repr=False)

    @classmethod
    def of_invocation(cls, remaining: Callable[[], float], stop_margin: float) -> Deadline:
        """Built once at the start of an invocation, while ``remaining()`` is its whole length."""
        length = remaining()
        return cls(remaining, safety_margin(lambda: length, stop_margin), length)

    def near(self) -> bool:
        """Too close to the end to start a job."""
        return self.remaining() < self.margin

    def room_for_page(self, expected: float = 0.0) -> bool:
        """Time enough for one more page: the margin plus ``PAGE_TIME_FACTOR`` times the
        longest page so far (or ``expected``, a page timed by an earlier attempt)."""
        need = self.margin + PAGE_TIME_FACTOR * max(self.longest_page, expected)
        return self.remaining() >= min(need, max(self.margin, self.length - self.margin))

    def start_page(self) -> None:
        """A page begins (its GET is next)."""
        self._page_from = self.remaining()

    def end_page(self) -> None:
        """The page begun last is stored and checkpointed: its time counts from now on."""
        if self._page_from is not None:
            self.longest_page = max(self.longest_page, self._page_from - self.remaining())
            self._page_from = None


@dataclass(frozen=True)
class ProcessorSettings(FromEnv):
    """The processor's knobs: the fields are their declarations (``scrape_pipeline.settings``)."""

    lease_seconds: float = number(
        "LEASE_SECONDS", 120.0, "a processor's lease; longer than its timeout"
    ).field()
    max_resubmissions_per_url: int = integer(
        "MAX_RESUBMISSIONS_PER_URL",
        2,
        "resubmissions per chain of failed attempts of one submission (a job someone else "
        "submitted starts a chain), so a URL scraped daily gets them every day and a chain that "
        "keeps failing ends; counted only once the API has answered with the new job, so a POST "
        "that failed (429, 5xx, no answer) spends nothing",
    ).field()
    # Independent failures at rate p poison a healthy job with probability p**8: 3e-6 per job
    # at the chaos matrix's 20 % crash rate. A poison job costs at most this many GETs.
    max_attempts: int = integer(
        "MAX_ATTEMPTS",
        8,
        "attempts at a job that raised or were killed (timeout, crash) before it is "
        "dead-lettered with its last error (`JobsPoisoned`, alarm); clean releases (not "
        "settled, throttled, an outage) do not count. At most this many Geonode GETs per "
        "poison job",
    ).field()
    retry_base_seconds: float = number(
        "RETRY_BASE_SECONDS", 15.0, "the first wait for a job not settled yet, doubled each time"
    ).field()
    retry_max_seconds: float = number(
        "RETRY_MAX_SECONDS",
        600.0,
        "the longest wait for a job not settled yet; below the staleness bound "
        "(`STALE_AFTER_SECONDS`)",
    ).field()
    watch_after_seconds: float = number(
        "WATCH_AFTER_SECONDS",
        1800.0,
        "a job unsettled this long is parked WATCHING instead of polled (processor); it is "
        "woken by its webhook or by the watch sweep. A job the watch sweep woke that still runs "
        "is parked again at once",
    ).field()
    not_found_max_tries: int = integer(
        "NOT_FOUND_MAX_TRIES",
        6,
        "404s (only 404s count) before a job nothing proves exists is dead-lettered as unknown; "
        "a later webhook, listing or delivery-log entry for it reopens it and the record is "
        "retired. A job known from a verified webhook, the job list, a submission or the "
        "delivery log is never closed on 404: its 404s count toward `SICK_AFTER_FAILURES`",
    ).field()
    # Six failed calls take about eight minutes of doubling waits (15 s to 4 min).
    sick_after_failures: int = integer(
        "SICK_AFTER_FAILURES",
        6,
        "failed calls in a row for one job (5xx, timeouts, 404s of a proven job; about eight "
        "minutes of doubling waits) before it is parked WATCHING (`JobsParkedSick`, alarm); the "
        "watch sweep then polls it at half the age of its failing run, at most hourly, until "
        "the API answers for it",
    ).field()
    throttle_default_seconds: float = number(
        "THROTTLE_DEFAULT_SECONDS", 30.0, "wait after a 429 without `Retry-After`"
    ).field()
    stop_margin_seconds: float = number(
        "STOP_MARGIN_SECONDS",
        10.0,
        "the processor starts no job and reads no further batch page this close to its deadline "
        "(at most a quarter of the invocation); a batch or crawl goes on in the next invocation "
        "from its page checkpoint",
    ).field()
    max_receive_count: int = integer(
        "MAX_RECEIVE_COUNT",
        5,
        "the queue's redrive count: near it, a job to retry later is re-sent instead, so a "
        "throttled job never lands in the DLQ",
    ).field()


@dataclass(frozen=True)
class Disposition:
    """What became of one message: ``retry_in`` seconds means "bring it back then"."""

    outcome: str
    retry_in: int | None = None
    detail: str = ""


OUTCOME_METRICS: Mapping[str, str] = {
    "stored": "JobsStored",
    "resubmitted": "JobsResubmitted",
    "dead_lettered": "JobsDeadLettered",
    "poisoned": "JobsPoisoned",
    "cancelled": "JobsCancelled",
    "not_settled": "JobsNotSettled",
    "not_found": "JobsNotSettled",
    "watching": "JobsWatching",
    "parked": "JobsParkedSick",
    "in_progress": "JobsInProgress",
    "out_of_time": "ProcessorOutOfTime",
    "failed_attempt": "JobsFailedAttempt",
    "throttled": "GeonodeThrottled",
    "api_unavailable": "GeonodeUnavailable",
    "aws_unavailable": "ProcessorAWSUnavailable",
    "busy": "JobsBusy",
    "already_done": "JobsAlreadyDone",
    "lease_lost": "JobsLeaseLost",
}


class _OutOfTime(Exception):
    """A batch or crawl stopped at a page boundary: the next page would not fit before the
    deadline (progress checkpointed)."""


@dataclass
class _PageDone:
    """What storing (part of) one page did."""

    stored: int = 0
    failed: int = 0
    pending: bool = False  # an item still runs (a cancelled job's in-flight one)
    stopped_at: int | None = None  # out of time: the position of the first item not done


def _pending_count(status: BatchStatus) -> int:
    """Items the batch's or crawl's counters say are still pending (0 when it says nothing)."""
    return sum(n for name, n in status.counters.items() if name.startswith("pending_"))


class JobProcessor:
    """Processes job messages; one instance per container."""

    def __init__(
        self,
        settings: ProcessorSettings,
        *,
        ledger: Ledger,
        client: GeonodeClient,
        results: ResultStore,
        resubmitter: Resubmitter,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._client = client
        self._results = results
        self._resubmitter = resubmitter
        self._clock = clock

    def process(self, message: JobMessage, *, deadline: Deadline | None = None) -> Disposition:
        """Take the job's lease and act on its current state, before ``deadline``."""
        if deadline is not None and deadline.near():
            # Started now, the job could be killed half-way: leave it for the next invocation.
            return Disposition("out_of_time", 1)
        key = message.key
        owner = new_owner_id()
        lease = self._ledger.acquire(key, owner, self.settings.lease_seconds, source=message.source)
        if not lease.granted:
            row = lease.row
            if row is None or row.is_done:
                return Disposition("already_done")
            # Someone holds it; if they die, their lease ends and this message finds it free.
            wait = (row.lease_until or self._clock.time()) - self._clock.time()
            return Disposition("busy", self._seconds(wait + 1))
        row = lease.row
        assert row is not None  # a granted lease always returns the new row
        try:
            if row.strikes > self.settings.max_attempts:
                # Every earlier attempt raised or was killed: stop spending API calls on it.
                return self._poisoned(key, owner, row, row.last_error)
            # Woken by the watch sweep: if it still runs, it goes back to sleep at once.
            return self._act(key, owner, row, deadline, woken=message.source == SOURCE_WATCH)
        except LeaseLostError:
            # Our lease expired mid-way and another holder took over: it finishes the job.
            return Disposition("lease_lost")
        except _OutOfTime:
            self._release_quietly(key, owner)
            return Disposition("in_progress", 1)
        except AWSUnavailableError as exc:
            self._release_quietly(key, owner)
            return Disposition("aws_unavailable", self._backoff(row.releases), str(exc))
        except RateLimitedError as exc:
            self._release_quietly(key, owner)
            wait = exc.retry_after or self.settings.throttle_default_seconds
            return Disposition("throttled", self._seconds(wait))
        except _FAILED_CALL as exc:
            try:
                return self._call_failed(key, owner, row, type(exc).__name__)
            except LeaseLostError:
                return Disposition("lease_lost")
            except AWSUnavailableError:  # the lease expires on its own; the message comes back
                return Disposition("api_unavailable", self._backoff(row.failures))
        except _NOT_THE_JOBS_FAULT as exc:
            self._release_quietly(key, owner)
            return Disposition("api_unavailable", self._backoff(row.releases), type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - a job that fails this way must not hold its lease
            return self._failed_attempt(key, owner, row, exc)

    def suspects_last(self, messages: Sequence[JobMessage | None]) -> tuple[list[int], set[int]]:
        """The order to process a batch in: jobs with strikes (earlier attempts that raised or
        were killed) last, fewest strikes first; ``None`` (unreadable) keeps its place. Also
        the indexes of those suspects.

        An attempt killed by the timeout takes its whole batch down with it. Put first, a job
        that kills every invocation would send its healthy batch-mates round the redrive limit
        into the DLQ before its own poison verdict; put last, they are done before it runs.
        One BatchGetItem per batch pays for it.
        """
        keys = [m.key for m in messages if m is not None]
        rows = self._ledger.get_many(keys) if keys else {}

        def strikes(index: int) -> int:
            message = messages[index]
            row = rows.get(message.key) if message is not None else None
            return row.strikes if row is not None and not row.is_done else 0

        order = sorted(range(len(messages)), key=strikes)  # stable: equal strikes keep order
        return order, {i for i in order if strikes(i) > 0}

    # -- acting on the state ---------------------------------------------------------------

    def _act(
        self,
        key: JobKey,
        owner: str,
        row: LedgerRow,
        deadline: Deadline | None,
        *,
        woken: bool = False,
    ) -> Disposition:
        try:
            state: Job | BatchStatus = (
                self._client.get_job(key.job_id)
                if key.kind is JobKind.EXTRACT
                else self._first_page(key, row, deadline)
            )
        except NotFoundError:
            if row.source in PROVEN_SOURCES:
                # A verified webhook, the job list or our own submission says it exists: a 404
                # is the API's lag or an incident. Re-checked until it answers, never closed.
                return self._call_failed(key, owner, row, "404", not_found=True)
            if row.not_found + 1 >= self.settings.not_found_max_tries:
                return self._dead_letter(
                    key, owner, {"reason": REASON_UNKNOWN_JOB, "status": "404"}
                )
            self._ledger.release(key, owner, not_found=True)
            return Disposition("not_found", self._backoff(row.not_found))
        if state.status == "completed":
            return self._store(key, owner, row, state, deadline)
        if state.status == "failed":
            self._retire_superseded(row)
            return self._failed(key, owner, row, state, deadline)
        if state.status == "cancelled":
            return self._cancelled(key, owner, row, state, deadline, woken=woken)
        return self._not_settled(key, owner, row, state, woken=woken)

    def _cancelled(
        self,
        key: JobKey,
        owner: str,
        row: LedgerRow,
        state: Job | BatchStatus,
        deadline: Deadline | None,
        *,
        woken: bool,
    ) -> Disposition:
        """Cancelled: a batch's or crawl's in-flight items still complete (the API lets them
        drain), so it is closed only once none is pending; what is done is stored meanwhile."""
        detail: dict[str, str] | None = {}
        if isinstance(state, BatchStatus):
            detail = self._store_items(key, owner, row, state, deadline)
        if detail is None:
            return self._not_settled(key, owner, row, state, woken=woken)
        # Only now is cancelled its outcome: a draining job keeps the record it was closed with.
        self._retire_superseded(row)
        self._ledger.finish(key, owner, Outcome.CANCELLED, detail)
        return Disposition("cancelled")

    def _first_page(self, key: JobKey, row: LedgerRow, deadline: Deadline | None) -> BatchStatus:
        """The batch's or crawl's state with the page its checkpoint points at, if it fits."""
        if deadline is not None:
            if not deadline.room_for_page(row.page_seconds):
                raise _OutOfTime
            deadline.start_page()
        return self._get_batch_or_crawl(key, page=row.next_page)

    def _get_batch_or_crawl(self, key: JobKey, page: int) -> BatchStatus:
        if key.kind is JobKind.BATCH:
            return self._client.get_batch(key.job_id, page=page, page_size=BATCH_PAGE_SIZE)
        return self._client.get_crawl(key.job_id, page=page, page_size=BATCH_PAGE_SIZE)

    def _store(
        self,
        key: JobKey,
        owner: str,
        row: LedgerRow,
        state: Job | BatchStatus,
        deadline: Deadline | None,
    ) -> Disposition:
        if isinstance(state, Job):
            metadata = {k: v for k, v in state.raw.items() if k != "data"}
            self._results.store(key.kind, key.job_id, state.data, metadata)
            detail = {"prefix": result_prefix(key.kind, key.job_id)}
        else:
            items = self._store_items(key, owner, row, state, deadline)
            if items is None:  # "completed" with an item still running: not settled after all
                return self._not_settled(key, owner, row, state, woken=False)
            detail = items
        superseded = row.detail.get("superseded")
        if superseded:
            # A job closed as unknown or never settled that did settle: its result is the one
            # outcome now, so the dead-letter record it was closed with is retired.
            self._results.retire(superseded)
        self._ledger.finish(key, owner, Outcome.STORED, detail)
        return Disposition("stored")

    def _store_items(
        self,
        key: JobKey,
        owner: str,
        row: LedgerRow,
        first_page: BatchStatus,
        deadline: Deadline | None,
    ) -> dict[str, str] | None:
        """Store every completed item once, dead-letter the failed ones, page by page.

        Starts at the row's checkpoint; after each page the checkpoint moves on, so a later
        invocation never redoes a stored page. Pages are numbered as asked for, whatever the
        answer echoes. Stops at a page boundary when the next page would not fit before the
        deadline. None when an item is still pending (a cancelled crawl's in-flight page): the
        checkpoint stays on its page, read again once it has drained.
        """
        stored, failed = row.items_stored, row.items_failed
        number, status, start = row.next_page, first_page, row.next_item
        while True:
            page = self._store_page(key, number, status, start, deadline)
            if page.stopped_at is not None:
                # Out of time inside a page too long for what was left: the items done are
                # progress, and the next attempt goes on from the next one.
                self._checkpoint(
                    key,
                    owner,
                    row,
                    next_page=number,
                    next_item=page.stopped_at,
                    stored=stored + page.stored,
                    failed=failed + page.failed,
                    deadline=deadline,
                )
                raise _OutOfTime
            last = number >= status.page.page_count or not status.page.items
            if page.pending or (last and _pending_count(status) > 0):
                # The page's finished items are stored (each object once); its counts wait
                # for the pass that finds it drained, so none is counted twice.
                if page.stored or page.failed:
                    self._checkpoint(
                        key,
                        owner,
                        row,
                        next_page=number,
                        next_item=start,
                        stored=stored,
                        failed=failed,
                        deadline=deadline,
                    )
                return None
            stored, failed, start = stored + page.stored, failed + page.failed, 0
            if last:
                break
            number += 1
            self._checkpoint(
                key, owner, row, next_page=number, stored=stored, failed=failed, deadline=deadline
            )
            if deadline is not None:
                if not deadline.room_for_page(row.page_seconds):
                    raise _OutOfTime
                deadline.start_page()
            status = self._get_batch_or_crawl(key, page=number)
        if deadline is not None:
            deadline.end_page()
        return {
            "prefix": result_prefix(key.kind, key.job_id),
            "items_stored": str(stored),
            "items_failed": str(failed),
        }

    def _store_page(
        self,
        key: JobKey,
        number: int,
        status: BatchStatus,
        start: int,
        deadline: Deadline | None,
    ) -> _PageDone:
        """One page's items from position ``start``: how many stored and dead-lettered, whether
        any is pending, and where it stopped if the deadline came first (after one item at
        least, so every attempt moves on)."""
        done = _PageDone()
        for position, item in enumerate(status.page.items):
            if position < start:
                continue
            if position > start and deadline is not None and deadline.near():
                done.stopped_at = position
                return done
            index = (
                item.input_index
                if item.input_index is not None
                else (number - 1) * BATCH_PAGE_SIZE + position
            )
            if item.status == "completed":
                metadata = {k: v for k, v in item.raw.items() if k != "data"}
                self._results.store(key.kind, key.job_id, item.data, metadata, item=index)
                done.stored += 1
            elif item.status == "failed":
                self._results.dead_letter(
                    key.kind,
                    key.job_id,
                    {"url": item.url, "code": item.error_code, "message": item.error_message},
                    item=index,
                )
                done.failed += 1
            elif item.status != "cancelled":
                done.pending = True
        return done

    def _checkpoint(
        self,
        key: JobKey,
        owner: str,
        row: LedgerRow,
        *,
        next_page: int,
        stored: int,
        failed: int,
        deadline: Deadline | None,
        next_item: int = 0,
    ) -> None:
        """Record the pages (and items) done so far: progress, which clears the strikes."""
        page_seconds = row.page_seconds
        if deadline is not None:
            deadline.end_page()
            page_seconds = deadline.longest_page or page_seconds
        self._ledger.checkpoint(
            key,
            owner,
            next_page=next_page,
            stored=stored,
            failed=failed,
            page_seconds=page_seconds,
            next_item=next_item,
        )

    def _failed(
        self,
        key: JobKey,
        owner: str,
        row: LedgerRow,
        state: Job | BatchStatus,
        deadline: Deadline | None,
    ) -> Disposition:
        if isinstance(state, Job) and state.error is not None and state.error.retryable:
            resubmission = self._resubmitter.resubmit(state, may_have_posted=row.attempts > 1)
            if resubmission is not None:
                detail = {
                    "resubmitted_as": resubmission.job_id,
                    "adopted": str(resubmission.adopted).lower(),
                }
                self._ledger.finish(key, owner, Outcome.RESUBMITTED, detail)
                return Disposition("resubmitted", detail=resubmission.job_id)
            reason = "resubmission budget spent"
        elif isinstance(state, BatchStatus):
            self._store_items(key, owner, row, state, deadline)
            reason = "batch failed"
        else:
            reason = "not retryable"
        error = state.error if isinstance(state, Job) else None
        record: dict[str, Any] = {
            "reason": reason,
            "code": error.code if error else None,
            "message": error.message if error else None,
            "url": state.url if isinstance(state, Job) else None,
        }
        return self._dead_letter(key, owner, record)

    def _not_settled(
        self, key: JobKey, owner: str, row: LedgerRow, state: Job | BatchStatus, *, woken: bool
    ) -> Disposition:
        created = (
            state.created_at.timestamp() if isinstance(state, Job) and state.created_at else None
        )
        created = created or row.created_at
        if woken or self._clock.time() - created >= self.settings.watch_after_seconds:
            # A crawl that runs for days: polling it every few minutes would cost a call per
            # job per poll. Parked, it is woken by its webhook or by the reconciler.
            self._ledger.watch(key, owner, job_created_at=created)
            return Disposition("watching", detail=state.status)
        self._ledger.release(key, owner, streak=Streak.ANSWERED)
        return Disposition("not_settled", self._backoff(row.releases))

    def _call_failed(
        self, key: JobKey, owner: str, row: LedgerRow, why: str, *, not_found: bool = False
    ) -> Disposition:
        """One more failed call in the job's run: retried after a wait that doubles with the
        run, and parked WATCHING at SICK_AFTER_FAILURES, so a job whose every GET fails while
        others succeed costs a few GETs an hour (the watch sweep's schedule), not one a retry.
        """
        if row.failures + 1 >= self.settings.sick_after_failures:
            self._ledger.park(key, owner, not_found=not_found)
            return Disposition("parked", detail=why)
        self._ledger.release(key, owner, not_found=not_found, streak=Streak.FAILED)
        outcome = "not_found" if not_found else "api_unavailable"
        return Disposition(outcome, self._backoff(row.failures), why)

    def _failed_attempt(
        self, key: JobKey, owner: str, row: LedgerRow, exc: Exception
    ) -> Disposition:
        """An unexpected error: keep the strike and the error; dead-letter at the bound."""
        error = f"{type(exc).__name__}: {exc}"
        if row.strikes >= self.settings.max_attempts:
            with contextlib.suppress(AWSUnavailableError, LeaseLostError):
                return self._poisoned(key, owner, row, error)
        # If the release fails, the lease expires on its own; the strike stays, so the bound holds.
        with contextlib.suppress(AWSUnavailableError, LeaseLostError):
            self._ledger.release(key, owner, error=error)
        return Disposition("failed_attempt", self._backoff(row.strikes), error)

    def _retire_superseded(self, row: LedgerRow) -> None:
        # A reopened job that ends other than stored: the record it was first closed with no
        # longer speaks for it. Retired before the outcome is written, so a dead letter for
        # another reason is the live record (a retry retires and writes it again: S3 keeps the
        # history, one live record).
        superseded = row.detail.get("superseded")
        if superseded:
            self._results.retire(superseded)

    def _poisoned(self, key: JobKey, owner: str, row: LedgerRow, error: str | None) -> Disposition:
        self._retire_superseded(row)
        record = {
            "reason": REASON_POISON,
            "attempts": str(row.strikes),
            # No error recorded: the attempts were killed (a timeout, out of memory).
            "last_error": error or "attempt did not finish (timeout or crash)",
        }
        self._dead_letter(key, owner, record)
        return Disposition("poisoned", detail=record["last_error"])

    def _dead_letter(self, key: JobKey, owner: str, record: dict[str, Any]) -> Disposition:
        where = self._results.dead_letter(key.kind, key.job_id, {"job_id": key.job_id, **record})
        reason = str(record.get("reason", ""))
        self._ledger.finish(key, owner, Outcome.DEAD_LETTERED, {"record": where, "reason": reason})
        return Disposition("dead_lettered", detail=reason)

    # -- helpers ---------------------------------------------------------------------------

    def _backoff(self, tries: int) -> int:
        wait = self.settings.retry_base_seconds * 2 ** min(max(tries, 0), 20)
        return self._seconds(min(wait, self.settings.retry_max_seconds))

    @staticmethod
    def _seconds(wait: float) -> int:
        return max(1, min(MAX_VISIBILITY_SECONDS, math.ceil(wait)))

    def _release_quietly(self, key: JobKey, owner: str) -> None:
        # If this fails too, the lease expires on its own and the job is retaken then.
        with contextlib.suppress(AWSUnavailableError, LeaseLostError):
            self._ledger.release(key, owner)
