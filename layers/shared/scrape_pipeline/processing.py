"""The processor's logic: turn one job id into exactly one outcome, whatever order things came in.

    lease ─▶ GET job ─▶ completed          store each format once (S3); DONE stored
      │             ├─▶ failed, retryable  resubmit (once per job, N per URL); DONE resubmitted
      │             ├─▶ failed otherwise   dead-letter record; DONE dead_lettered
      │             ├─▶ cancelled          DONE cancelled (a crawl's finished pages stored first)
      │             ├─▶ not settled        release, retry later with a growing delay; after
      │             │                      WATCH_AFTER, or at once when the watch sweep woke
      │             │                      it, park it WATCHING (no message, no polls)
      │             ├─▶ 404                release; only 404s count toward "unknown job"
      │             └─▶ 429, 5xx, network  release; retry after Retry-After or a backoff
      ├─ any other error: release, keeping the attempt's strike and the error
      ├─ strikes past MAX_ATTEMPTS (errors, or attempts killed by a timeout): dead-letter, no call
      └─ not granted: DONE → drop the message; leased elsewhere → look again when that lease ends

It acts on the job's state as the API reports it now, never on the webhook payload. It never
sleeps: "retry later" is a ``Disposition`` with a delay, which the handler turns into an SQS
visibility change. It watches the invocation's remaining time: no job is started, and no
further page of a batch or crawl is read, within ``STOP_MARGIN`` of the deadline. A batch's
or crawl's items are stored page by page with a checkpoint in the ledger, so a large one
completes across invocations without storing a page twice.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
    REASON_POISON,
    REASON_UNKNOWN_JOB,
    SOURCE_WATCH,
    JobKey,
    JobKind,
    Outcome,
)
from scrape_pipeline.ledger import LeaseLostError, Ledger, LedgerRow, new_owner_id
from scrape_pipeline.queue import JobMessage
from scrape_pipeline.resubmission import Resubmitter
from scrape_pipeline.results import ResultStore, result_prefix
from scrape_pipeline.settings import read_float, read_int

# SQS caps a visibility timeout at 12 h; our waits stay far below.
MAX_VISIBILITY_SECONDS = 43_200
BATCH_PAGE_SIZE = 50  # the API's largest page of batch and crawl items
# Errors that say nothing about the job: our key, our balance, the API or the network.
_NOT_THE_JOBS_FAULT = (
    AuthError,
    MissingAPIKeyError,
    PaymentRequiredError,
    ServerError,
    TransportError,
)


@dataclass(frozen=True)
class Deadline:
    """The end of the invocation as the processor sees it: seconds left, and the margin kept."""

    remaining: Callable[[], float]
    margin: float

    @classmethod
    def of_invocation(cls, remaining: Callable[[], float], stop_margin: float) -> Deadline:
        """Built once at the start of an invocation, while ``remaining()`` is its whole length."""
        return cls(remaining, safety_margin(remaining, stop_margin))

    def near(self) -> bool:
        """Too close to the end to start a job or read another page."""
        return self.remaining() < self.margin


@dataclass(frozen=True)
class ProcessorSettings:
    """The processor's knobs (environment variables in brackets).

    | variable | default | why |
    |---|---|---|
    | LEASE_SECONDS | 120 | longer than the processor's timeout, so a live holder keeps it |
    | MAX_RESUBMISSIONS_PER_URL | 2 | a URL that keeps failing is not retried for ever |
    | MAX_ATTEMPTS | 8 | attempts that raised or were killed before a job is dead-lettered |
    | RETRY_BASE_SECONDS | 15 | first wait for a job not settled yet (doubles each time) |
    | RETRY_MAX_SECONDS | 600 | longest wait; below the reconciler's staleness bound |
    | WATCH_AFTER_SECONDS | 1800 | a job unsettled this long is parked WATCHING, not polled |
    | NOT_FOUND_MAX_TRIES | 6 | 404s before a job is dead-lettered as unknown (reopenable) |
    | THROTTLE_DEFAULT_SECONDS | 30 | wait after a 429 without Retry-After |
    | STOP_MARGIN_SECONDS | 10 | no new job or page this close to the invocation's deadline |
    | MAX_RECEIVE_COUNT | 5 | the queue's redrive count: a retry about to reach it is re-sent |
    """

    lease_seconds: float = 120.0
    max_resubmissions_per_url: int = 2
    # Independent failures at rate p poison a healthy job with probability p**8: 3e-6 per job
    # at the chaos matrix's 20 % crash rate. A poison job costs at most this many GETs.
    max_attempts: int = 8
    retry_base_seconds: float = 15.0
    retry_max_seconds: float = 600.0
    watch_after_seconds: float = 1800.0
    not_found_max_tries: int = 6
    throttle_default_seconds: float = 30.0
    stop_margin_seconds: float = 10.0
    max_receive_count: int = 5

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProcessorSettings:
        """Read the settings; ``SettingsError`` names a bad value (an integer given "2.5" too)."""
        env = os.environ if env is None else env
        return cls(
            lease_seconds=read_float(env, "LEASE_SECONDS", cls.lease_seconds),
            max_resubmissions_per_url=read_int(
                env, "MAX_RESUBMISSIONS_PER_URL", cls.max_resubmissions_per_url
            ),
            max_attempts=read_int(env, "MAX_ATTEMPTS", cls.max_attempts),
            retry_base_seconds=read_float(env, "RETRY_BASE_SECONDS", cls.retry_base_seconds),
            retry_max_seconds=read_float(env, "RETRY_MAX_SECONDS", cls.retry_max_seconds),
            watch_after_seconds=read_float(env, "WATCH_AFTER_SECONDS", cls.watch_after_seconds),
            not_found_max_tries=read_int(env, "NOT_FOUND_MAX_TRIES", cls.not_found_max_tries),
            throttle_default_seconds=read_float(
                env, "THROTTLE_DEFAULT_SECONDS", cls.throttle_default_seconds
            ),
            stop_margin_seconds=read_float(env, "STOP_MARGIN_SECONDS", cls.stop_margin_seconds),
            max_receive_count=read_int(env, "MAX_RECEIVE_COUNT", cls.max_receive_count),
        )


@dataclass(frozen=True)
class Disposition:
    """What became of one message: ``retry_in`` seconds means "bring it back then"."""

    outcome: str
    retry_in: int | None = None
    detail: str = ""

    @property
    def done(self) -> bool:
        """The message can be deleted."""
        return self.retry_in is None


OUTCOME_METRICS: Mapping[str, str] = {
    "stored": "JobsStored",
    "resubmitted": "JobsResubmitted",
    "dead_lettered": "JobsDeadLettered",
    "poisoned": "JobsPoisoned",
    "cancelled": "JobsCancelled",
    "not_settled": "JobsNotSettled",
    "not_found": "JobsNotSettled",
    "watching": "JobsWatching",
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
    """A batch or crawl stopped at a page boundary near the deadline (progress checkpointed)."""


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
                else self._get_batch_or_crawl(key, page=row.next_page)
            )
        except NotFoundError:
            if row.not_found + 1 >= self.settings.not_found_max_tries:
                return self._dead_letter(
                    key, owner, {"reason": REASON_UNKNOWN_JOB, "status": "404"}
                )
            self._ledger.release(key, owner, not_found=True)
            return Disposition("not_found", self._backoff(row.not_found))
        if state.status == "completed":
            return self._store(key, owner, row, state, deadline)
        if state.status in ("failed", "cancelled"):
            self._retire_superseded(row)
        if state.status == "failed":
            return self._failed(key, owner, row, state, deadline)
        if state.status == "cancelled":
            if isinstance(state, BatchStatus):
                self._store_items(key, owner, row, state, deadline)
            self._ledger.finish(key, owner, Outcome.CANCELLED)
            return Disposition("cancelled")
        return self._not_settled(key, owner, row, state, woken=woken)

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
            detail = self._store_items(key, owner, row, state, deadline)
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
    ) -> dict[str, str]:
        """Store every completed item once, dead-letter the failed ones, page by page.

        Starts at the row's checkpoint; after each page the checkpoint moves on, so a later
        invocation never redoes a stored page. Stops at a page boundary near the deadline.
        """
        stored, failed = row.items_stored, row.items_failed
        status = first_page
        while True:
            for position, item in enumerate(status.page.items):
                index = (
                    item.input_index
                    if item.input_index is not None
                    else (status.page.page - 1) * BATCH_PAGE_SIZE + position
                )
                if item.status == "completed":
                    metadata = {k: v for k, v in item.raw.items() if k != "data"}
                    self._results.store(key.kind, key.job_id, item.data, metadata, item=index)
                    stored += 1
                elif item.status == "failed":
                    self._results.dead_letter(
                        key.kind,
                        key.job_id,
                        {"url": item.url, "code": item.error_code, "message": item.error_message},
                        item=index,
                    )
                    failed += 1
            if status.page.is_last or not status.page.items:
                break
            next_page = status.page.page + 1
            self._ledger.checkpoint(key, owner, next_page=next_page, stored=stored, failed=failed)
            if deadline is not None and deadline.near():
                raise _OutOfTime
            status = self._get_batch_or_crawl(key, page=next_page)
        return {
            "prefix": result_prefix(key.kind, key.job_id),
            "items_stored": str(stored),
            "items_failed": str(failed),
        }

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
        self._ledger.release(key, owner)
        return Disposition("not_settled", self._backoff(row.releases))

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
