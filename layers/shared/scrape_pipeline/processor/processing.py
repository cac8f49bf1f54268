"""The processor's logic: one job id in, exactly one outcome, whatever order things came in; it
acts on the API's answer now and never sleeps ("later" is a ``Disposition``'s delay).

    lease ─▶ GET job ─▶ completed          store each format once (S3); DONE stored (a batch's
      │             │                      or crawl's retryably failed items resubmitted as
      │             │                      extract jobs first: WATCHING until they settle)
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
      ├─ a batch or crawl with every page stored and items retrying: no GET; settle those
      │  whose extract jobs settled (the ledger says), manifest and DONE once none is left
      └─ not granted: DONE → drop the message; leased elsewhere → look again when that lease ends
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.events.outbox import EmitResult, Emitter
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
from scrape_pipeline.geonode.listing_lag import ListingCatchingUpError
from scrape_pipeline.geonode.models import ApiStatus, BatchStatus, Job
from scrape_pipeline.jobs import (
    DETAIL_RESUBMITTED_AS,
    DETAIL_TOKENS,
    REASON_POISON,
    REASON_UNKNOWN_JOB,
    JobKind,
    Outcome,
    Source,
    source_proven,
)
from scrape_pipeline.ledger.leases import LeaseLostError, Streak, new_owner_id
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.closing import Closer, Waker, failure_record
from scrape_pipeline.processor.deadline import Attempt, Deadline, OutOfTimeError
from scrape_pipeline.processor.disposition import (
    Disposition,
    MessageOutcome,
    backoff,
    items_dead,
    retry_after,
    seconds,
)
from scrape_pipeline.processor.manifest import DETAIL_KEYS, counted, settled_items
from scrape_pipeline.processor.paged_store import (
    DETAIL_CANCELLED,
    DETAIL_PAGES,
    DETAIL_RETRYING,
    PagedStore,
)
from scrape_pipeline.processor.queue import JobMessage
from scrape_pipeline.processor.resubmission import Resubmitter, hand_on
from scrape_pipeline.processor.results import ResultStore, metadata_of, result_prefix
from scrape_pipeline.processor.settings import ProcessorSettings

# Errors that say nothing about the job: our key, our balance (the whole account's).
_NOT_THE_JOBS_FAULT = (AuthError, MissingAPIKeyError, PaymentRequiredError)
# A call for this job that failed without an answer about it: one more in its failed run.
_FAILED_CALL = (ServerError, TransportError)
# Errors after which the lease is handed back at once and the message retried later.
_RELEASED_ON = (OutOfTimeError, AWSUnavailableError, RateLimitedError, ListingCatchingUpError)


class JobProcessor:
    """Processes job messages; one instance per container."""

    def __init__(
        self,
        settings: ProcessorSettings,
        *,
        ledger: WorkLedger,
        client: GeonodeClient,
        results: ResultStore,
        resubmitter: Resubmitter,
        clock: Clock = SYSTEM_CLOCK,
        emitter: Emitter | None = None,
        waker: Waker,
    ) -> None:
        self.settings = settings
        self._emitter = emitter
        self._ledger = ledger
        self._client = client
        self._results = results
        # The resubmitter retries items too, within the same per-chain budget.
        self._pages = PagedStore(
            ledger=ledger,
            client=client,
            results=results,
            retrier=resubmitter,
            retryable_codes=settings.retryable_item_codes,
        )
        self._resubmitter = resubmitter
        self._clock = clock
        self._closer = Closer(ledger, results, clock=clock, emitter=emitter, waker=waker)

    def process(self, message: JobMessage, *, deadline: Deadline | None = None) -> Disposition:
        """Take the job's lease and act on its current state, before ``deadline``."""
        deadline = deadline or Deadline.endless()
        if deadline.near():
            # Started now, the job could be killed half-way: leave it for the next invocation.
            return Disposition(MessageOutcome.OUT_OF_TIME, 1)
        owner = new_owner_id()
        lease = self._ledger.acquire(
            message.key, owner, self.settings.lease_seconds, source=message.source
        )
        if not lease.granted:
            return self._not_granted(lease.row)
        assert lease.row is not None  # a granted lease always returns the new row
        attempt = Attempt(
            message.key, owner, lease.row, deadline, woken=message.source == Source.WATCH
        )
        return self._attempt(attempt)

    def _attempt(self, attempt: Attempt) -> Disposition:
        """Act on a job whose lease ``attempt`` holds; whatever fails, the lease is not kept."""
        try:
            if attempt.row.strikes > self.settings.max_attempts:
                # Every earlier attempt raised or was killed: stop spending API calls on it.
                return self._poisoned(attempt, attempt.row.last_error)
            return self._act(attempt)
        except LeaseLostError:
            # Our lease expired mid-way and another holder took over: it finishes the job.
            return Disposition(MessageOutcome.LEASE_LOST)
        except (*_RELEASED_ON, *_NOT_THE_JOBS_FAULT) as exc:
            self._release_quietly(attempt)
            return retry_after(exc, attempt.row, self.settings, self._clock.time())
        except _FAILED_CALL as exc:
            return self._after_failed_call(attempt, type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - a job that fails this way must not hold its lease
            return self._failed_attempt(attempt, exc)

    def emit_events(self) -> EmitResult:
        """Send the events of the outcomes written since the last call (a batch's end)."""
        if self._emitter is None:
            return EmitResult()
        return self._emitter.flush(self._clock.time())

    def _not_granted(self, row: LedgerRow | None) -> Disposition:
        if row is None or row.is_done:
            return Disposition(MessageOutcome.ALREADY_DONE)
        # Someone holds it; if they die, their lease ends and this message finds it free.
        wait = (row.lease_until or self._clock.time()) - self._clock.time()
        return Disposition(MessageOutcome.BUSY, seconds(wait + 1))

    def _after_failed_call(self, attempt: Attempt, why: str) -> Disposition:
        try:
            return self._call_failed(attempt, why)
        except LeaseLostError:
            return Disposition(MessageOutcome.LEASE_LOST)
        except AWSUnavailableError:  # the lease expires on its own; the message comes back
            return Disposition(
                MessageOutcome.API_UNAVAILABLE, backoff(self.settings, attempt.row.failures)
            )

    def _act(self, attempt: Attempt) -> Disposition:
        if attempt.key.kind is not JobKind.EXTRACT and attempt.row.pages_stored:
            # Only retried items are left, and the ledger says how they went: no Geonode call.
            return self._settle_items(attempt, attempt.row)
        try:
            api_job: Job | BatchStatus = (
                self._client.get_job(attempt.key.job_id)
                if attempt.key.kind is JobKind.EXTRACT
                else self._pages.page(attempt, attempt.row.next_page)
            )
        except NotFoundError:
            return self._not_found(attempt)
        # A settled job's one outcome, by its status (an unknown status is not settled).
        by_status: Mapping[str, Callable[[Attempt, Job | BatchStatus], Disposition]] = {
            ApiStatus.COMPLETED: self._store,
            ApiStatus.FAILED: self._failed,
            ApiStatus.CANCELLED: self._cancelled,
        }
        settled = by_status.get(api_job.status)
        if settled is None:
            return self._not_settled(attempt, api_job, woken=attempt.woken)
        return settled(attempt, api_job)

    def _not_found(self, attempt: Attempt) -> Disposition:
        row = attempt.row
        if source_proven(row.source):
            # Known to exist: a 404 is the API's lag or an incident, re-checked, never closed.
            return self._call_failed(attempt, "404", not_found=True)
        if row.not_found + 1 >= self.settings.not_found_max_tries:
            return self._closer.dead_letter(
                attempt, {"reason": REASON_UNKNOWN_JOB, "status": "404"}
            )
        self._ledger.release(attempt.key, attempt.owner, not_found=True)
        return Disposition(MessageOutcome.NOT_FOUND, backoff(self.settings, row.not_found))

    def _cancelled(self, attempt: Attempt, api_job: Job | BatchStatus) -> Disposition:
        """Closed once no item is pending (the API lets a crawl's in-flight items drain)."""
        detail: dict[str, str] | None = {}
        if isinstance(api_job, BatchStatus):
            detail = self._pages.store_items(attempt, api_job)
        if detail is None:
            return self._not_settled(attempt, api_job, woken=attempt.woken)
        # Only now is cancelled its outcome: a draining job keeps the record it was closed with.
        return self._closer.finish(attempt, Outcome.CANCELLED, detail)

    def _store(self, attempt: Attempt, api_job: Job | BatchStatus) -> Disposition:
        if isinstance(api_job, BatchStatus):
            items = self._pages.store_items(attempt, api_job, retry=True)
            if items is None:  # "completed" with an item still running: not settled after all
                return self._not_settled(attempt, api_job, woken=False)
            if DETAIL_RETRYING in items:
                return self._retrying(attempt, items)
            # A job closed as unknown that did settle: its dead-letter record is retired.
            return self._closer.finish(attempt, Outcome.STORED, items)
        key = attempt.key
        data, metadata = api_job.data, metadata_of(api_job.raw)
        keys = self._results.store(key.kind, key.job_id, data, metadata)
        # The keys, for the item this job may retry (linked maybe only later): its manifest line.
        detail = {"prefix": result_prefix(key.kind, key.job_id), DETAIL_KEYS: ",".join(keys)}
        if api_job.tokens_charged is not None:  # what the job cost: runs show adds it up
            detail[DETAIL_TOKENS] = str(api_job.tokens_charged)
        return self._closer.finish(
            attempt, Outcome.STORED, detail, url=api_job.url, keys=keys, job=api_job
        )

    def _failed(self, attempt: Attempt, api_job: Job | BatchStatus) -> Disposition:
        if isinstance(api_job, BatchStatus):
            items = self._pages.store_items(attempt, api_job)
            closed = self._closer.dead_letter(attempt, failure_record("batch failed", None))
            return replace(closed, items_dead_lettered=items_dead(items or {}))
        if api_job.error is None or not api_job.error.retryable:
            return self._closer.dead_letter(attempt, failure_record("not retryable", api_job))
        detail = self._resubmitter.resubmit(api_job, attempt)
        if detail is None:
            return self._closer.dead_letter(
                attempt, failure_record("resubmission budget spent", api_job)
            )
        # The item or run this job is followed for goes on with the new job, before this closes.
        hand_on(self._ledger, attempt.row, attempt.owner, detail[DETAIL_RESUBMITTED_AS])
        return self._closer.finish(
            attempt, Outcome.RESUBMITTED, detail, said=detail[DETAIL_RESUBMITTED_AS]
        )

    def _retrying(self, attempt: Attempt, items: Mapping[str, str]) -> Disposition:
        """Every page stored, some items retrying: settle those already settled."""
        names = ("items_stored", "items_failed", DETAIL_CANCELLED)
        stored, failed, cancelled = (int(items[name]) for name in names)
        row = self._ledger.settle_items(
            attempt.key,
            attempt.owner,
            settled=frozenset(),
            counts=(stored, failed, cancelled),
            pages=int(items[DETAIL_PAGES]),
        )
        settled = self._settle_items(attempt, row)
        return replace(settled, items_retried=int(items[DETAIL_RETRYING]))

    def _settle_items(self, attempt: Attempt, row: LedgerRow) -> Disposition:
        """Take settled retried items off the row; the manifest and DONE once none is left."""
        settled = settled_items(self._ledger, row.retrying_items)
        manifest = self._pages.manifest
        for record in settled.values():
            manifest.settle_retry(attempt.key, record)
        counts = counted(
            settled.values(), (row.items_stored, row.items_failed, row.items_cancelled)
        )
        if settled:
            row = self._ledger.settle_items(
                attempt.key,
                attempt.owner,
                settled=frozenset(settled),
                counts=counts,
                pages=row.pages_stored,
            )
        if row.retrying_items:
            created = row.job_created_at or row.created_at
            self._ledger.watch(attempt.key, attempt.owner, job_created_at=created)
            return Disposition(MessageOutcome.ITEMS_RETRYING, detail=str(row.items_retrying))
        detail = self._pages.closed(attempt.key, counts, manifest.kept_status(attempt.key))
        return self._closer.finish(attempt, Outcome.STORED, detail)

    def _not_settled(
        self, attempt: Attempt, api_job: Job | BatchStatus, *, woken: bool
    ) -> Disposition:
        row = attempt.row
        created = row.created_at
        if isinstance(api_job, Job) and api_job.created_at:
            created = api_job.created_at.timestamp()
        if woken or self._clock.time() - created >= self.settings.watch_after_seconds:
            # Parked, not polled: woken by its webhook or by the watch sweep.
            self._ledger.watch(attempt.key, attempt.owner, job_created_at=created)
            return Disposition(MessageOutcome.WATCHING, detail=api_job.status)
        self._ledger.release(attempt.key, attempt.owner, streak=Streak.ANSWERED)
        return Disposition(MessageOutcome.NOT_SETTLED, backoff(self.settings, row.releases))

    def _call_failed(self, attempt: Attempt, why: str, *, not_found: bool = False) -> Disposition:
        """One more failed call: a doubling wait; parked WATCHING at SICK_AFTER_FAILURES, so a
        job whose every GET fails costs a few GETs an hour (the watch sweep's), not one a retry."""
        row = attempt.row
        if row.failures + 1 >= self.settings.sick_after_failures:
            self._ledger.watch(attempt.key, attempt.owner, not_found=not_found)
            return Disposition(MessageOutcome.PARKED, detail=why)
        self._ledger.release(attempt.key, attempt.owner, not_found=not_found, streak=Streak.FAILED)
        outcome = MessageOutcome.NOT_FOUND if not_found else MessageOutcome.API_UNAVAILABLE
        return Disposition(outcome, backoff(self.settings, row.failures), why)

    def _failed_attempt(self, attempt: Attempt, exc: Exception) -> Disposition:
        """An unexpected error: keep the strike and the error; dead-letter at the bound."""
        error = f"{type(exc).__name__}: {exc}"
        if attempt.row.strikes >= self.settings.max_attempts:
            with contextlib.suppress(AWSUnavailableError, LeaseLostError):
                return self._poisoned(attempt, error)
        # If the release fails, the lease expires on its own; the strike stays, so the bound holds.
        with contextlib.suppress(AWSUnavailableError, LeaseLostError):
            self._ledger.release(attempt.key, attempt.owner, error=error)
        return Disposition(
            MessageOutcome.FAILED_ATTEMPT, backoff(self.settings, attempt.row.strikes), error
        )

    def _poisoned(self, attempt: Attempt, error: str | None) -> Disposition:
        record = {
            "reason": REASON_POISON,
            "attempts": str(attempt.row.strikes),
            # No error recorded: the attempts were killed (a timeout, out of memory).
            "last_error": error or "attempt did not finish (timeout or crash)",
        }
        self._closer.dead_letter(attempt, record)
        return Disposition(MessageOutcome.POISONED, detail=record["last_error"])

    def _release_quietly(self, attempt: Attempt) -> None:
        # If this fails too, the lease expires on its own and the job is retaken then.
        with contextlib.suppress(AWSUnavailableError, LeaseLostError):
            self._ledger.release(attempt.key, attempt.owner)
