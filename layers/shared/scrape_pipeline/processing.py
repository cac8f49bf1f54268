"""The processor's logic: turn one job id into exactly one outcome, whatever order things came in.

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

An extract job that retries an item (its row's ``retry_of``) wakes its batch or crawl once it
settles for good (``scrape_pipeline.item_retries``).

It acts on the job as the API reports it now (``api_job``, beside ``row.state``, the ledger's
view), never on the webhook payload. It never sleeps: "retry later" is a ``Disposition`` with a
delay, which the handler turns into an SQS visibility change. It watches the invocation's
remaining time (``scrape_pipeline.deadline``): no job is started within ``STOP_MARGIN`` of the
deadline, and no page of a batch or crawl unless it fits. A batch's or crawl's items are
stored page by page with a checkpoint (``scrape_pipeline.paged_store``). A batch or crawl is
closed only once none of its items is pending: a cancelled crawl's in-flight pages still
complete, and are stored when they do. The batch a Lambda invocation holds is
``scrape_pipeline.batch_run``'s.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from scrape_pipeline.attempt import Attempt, OutOfTimeError
from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.deadline import Deadline
from scrape_pipeline.disposition import Disposition, MessageOutcome, items_dead
from scrape_pipeline.events.detail import outcome_event
from scrape_pipeline.events.outbox import EmitResult, Emitter, told_with_run
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
from scrape_pipeline.geonode.models import ApiStatus, BatchStatus, Job
from scrape_pipeline.item_retries import (
    DEFAULT_RETRYABLE_ITEM_CODES,
    DETAIL_KEYS,
    ItemRetrier,
    RetryRef,
    settled_items,
)
from scrape_pipeline.jobs import (
    DETAIL_RESUBMITTED_AS,
    DETAIL_TOKENS,
    REASON_POISON,
    REASON_UNKNOWN_JOB,
    JobKey,
    JobKind,
    Outcome,
    Source,
    source_proven,
)
from scrape_pipeline.ledger import LeaseLostError, Ledger, LedgerRow, Streak, new_owner_id
from scrape_pipeline.listing_lag import ListingCatchingUpError
from scrape_pipeline.paged_store import (
    DETAIL_CANCELLED,
    DETAIL_PAGES,
    DETAIL_RETRYING,
    PagedStore,
)
from scrape_pipeline.queue import JobMessage
from scrape_pipeline.resubmission import Resubmitter, hand_on
from scrape_pipeline.results import ResultStore, metadata_of, result_prefix
from scrape_pipeline.settings import FromEnv, integer, number, paths

# SQS caps a visibility timeout at 12 h; our waits stay far below.
MAX_VISIBILITY_SECONDS = 43_200
# Errors that say nothing about the job: our key, our balance (the whole account's).
_NOT_THE_JOBS_FAULT = (AuthError, MissingAPIKeyError, PaymentRequiredError)
# A call for this job that failed without an answer about it: one more in its failed run.
_FAILED_CALL = (ServerError, TransportError)
# Wakes a batch or crawl (sends its message): an extract job retrying one of its items settled.
type Waker = Callable[[JobKey], None]
# Errors after which the lease is handed back at once and the message retried later.
_RELEASED_ON = (OutOfTimeError, AWSUnavailableError, RateLimitedError, ListingCatchingUpError)


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
    retryable_item_codes: tuple[str, ...] = paths(
        "RETRYABLE_ITEM_CODES",
        DEFAULT_RETRYABLE_ITEM_CODES,
        "a batch's or crawl's item failed with one of these `error_code`s (the API's item shape "
        "has no `retryable` flag; one it gives wins) is resubmitted as an extract job linked to "
        "it, within `MAX_RESUBMISSIONS_PER_URL`, instead of dead-lettered",
    ).field()
    event_linger_seconds: float = number(
        "EVENT_LINGER_SECONDS",
        0.0,
        "outcome events a batch leaves short of a full PutEvents call (ten) wait in the warm "
        "processor for the next batches' until ten are due or the oldest has waited this long "
        "(checked at each batch's end; a container that is not invoked again leaves them to "
        "the outbox sweep). 0 sends every batch's events at its end. At most 30, so a held "
        "event is sent before the sweep's grace (`OUTBOX_GRACE_SECONDS`, 90) ends",
        minimum=0.0,
    ).field()
    max_receive_count: int = integer(
        "MAX_RECEIVE_COUNT",
        5,
        "the queue's redrive count: near it, a job to retry later is re-sent instead, so a "
        "throttled job never lands in the DLQ",
    ).field()


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
        emitter: Emitter | None = None,
        waker: Waker | None = None,
    ) -> None:
        self.settings = settings
        # None: nothing wakes a batch whose retried item settled but the watch sweep.
        self._waker = waker
        # None: no bus (EVENT_BUS_NAME unset), so no outcome is told and nothing is kept for it.
        self._emitter = emitter
        self._ledger = ledger
        self._client = client
        self._results = results
        self._retrier = ItemRetrier(
            client, ledger, per_chain_limit=settings.max_resubmissions_per_url, lag=resubmitter.lag
        )
        self._pages = PagedStore(
            ledger=ledger,
            client=client,
            results=results,
            retrier=self._retrier,
            retryable_codes=settings.retryable_item_codes,
        )
        self._resubmitter = resubmitter
        self._clock = clock

    def process(self, message: JobMessage, *, deadline: Deadline | None = None) -> Disposition:
        """Take the job's lease and act on its current state, before ``deadline``."""
        if deadline is not None and deadline.near():
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
            return self._retry_after(exc, attempt.row)
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
        return Disposition(MessageOutcome.BUSY, self._seconds(wait + 1))

    def _retry_after(self, exc: Exception, row: LedgerRow) -> Disposition:
        """When to bring back a message whose lease ``exc`` made us hand back at once."""
        if isinstance(exc, OutOfTimeError):
            return Disposition(MessageOutcome.IN_PROGRESS, 1)
        if isinstance(exc, ListingCatchingUpError):  # a POST's answer lost: in doubt till then
            return Disposition(MessageOutcome.IN_DOUBT, exc.retry_in(self._clock.time()))
        if isinstance(exc, AWSUnavailableError):
            return Disposition(
                MessageOutcome.AWS_UNAVAILABLE, self._backoff(row.releases), str(exc)
            )
        if isinstance(exc, RateLimitedError):
            wait = exc.retry_after or self.settings.throttle_default_seconds
            return Disposition(MessageOutcome.THROTTLED, self._seconds(wait))
        return Disposition(
            MessageOutcome.API_UNAVAILABLE, self._backoff(row.releases), type(exc).__name__
        )

    def _after_failed_call(self, attempt: Attempt, why: str) -> Disposition:
        try:
            return self._call_failed(attempt, why)
        except LeaseLostError:
            return Disposition(MessageOutcome.LEASE_LOST)
        except AWSUnavailableError:  # the lease expires on its own; the message comes back
            return Disposition(MessageOutcome.API_UNAVAILABLE, self._backoff(attempt.row.failures))

    # -- acting on the job as the API reports it -------------------------------------------

    def _act(self, attempt: Attempt) -> Disposition:
        if attempt.key.kind is not JobKind.EXTRACT and attempt.row.pages_stored:
            # Every page is stored; only retried items are left, and the ledger says how they
            # went: no Geonode call.
            return self._settle_items(attempt, attempt.row)
        try:
            api_job: Job | BatchStatus = (
                self._client.get_job(attempt.key.job_id)
                if attempt.key.kind is JobKind.EXTRACT
                else self._pages.first_page(attempt)
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
            # A verified webhook, the job list or our own submission says it exists: a 404
            # is the API's lag or an incident. Re-checked until it answers, never closed.
            return self._call_failed(attempt, "404", not_found=True)
        if row.not_found + 1 >= self.settings.not_found_max_tries:
            return self._dead_letter(attempt, {"reason": REASON_UNKNOWN_JOB, "status": "404"})
        self._ledger.release(attempt.key, attempt.owner, not_found=True)
        return Disposition(MessageOutcome.NOT_FOUND, self._backoff(row.not_found))

    def _cancelled(self, attempt: Attempt, api_job: Job | BatchStatus) -> Disposition:
        """Cancelled: a batch's or crawl's in-flight items still complete (the API lets them
        drain), so it is closed only once none is pending; what is done is stored meanwhile."""
        detail: dict[str, str] | None = {}
        if isinstance(api_job, BatchStatus):
            detail = self._pages.store_items(attempt, api_job)
        if detail is None:
            return self._not_settled(attempt, api_job, woken=attempt.woken)
        # Only now is cancelled its outcome: a draining job keeps the record it was closed with.
        self._retire_superseded(attempt.row)
        self._finish(attempt, Outcome.CANCELLED, detail)
        return Disposition(MessageOutcome.CANCELLED, items_dead_lettered=items_dead(detail))

    def _store(self, attempt: Attempt, api_job: Job | BatchStatus) -> Disposition:
        key = attempt.key
        if isinstance(api_job, Job):
            stored = self._results.store(
                key.kind, key.job_id, api_job.data, metadata_of(api_job.raw)
            )
            detail = {"prefix": result_prefix(key.kind, key.job_id)}
            if api_job.tokens_charged is not None:  # what the job cost: runs show adds it up
                detail[DETAIL_TOKENS] = str(api_job.tokens_charged)
        else:
            items = self._pages.store_items(attempt, api_job, retry=True)
            if items is None:  # "completed" with an item still running: not settled after all
                return self._not_settled(attempt, api_job, woken=False)
            if DETAIL_RETRYING in items:
                return self._retrying(attempt, items)
            detail = items
        # A job closed as unknown or never settled that did settle: its result is the one
        # outcome now, so the dead-letter record it was closed with is retired.
        self._retire_superseded(attempt.row)
        if isinstance(api_job, Job):
            keys = [*stored.written, *stored.already_present]
            # Kept for a batch's item this job may retry: it may be linked only after this
            # (its webhook came before the link), and the item's manifest line gives them.
            detail[DETAIL_KEYS] = ",".join(sorted(keys))
            self._finish(attempt, Outcome.STORED, detail, url=api_job.url, keys=keys, job=api_job)
        else:
            self._finish(attempt, Outcome.STORED, detail)
        return Disposition(MessageOutcome.STORED, items_dead_lettered=items_dead(detail))

    def _failed(self, attempt: Attempt, api_job: Job | BatchStatus) -> Disposition:
        self._retire_superseded(attempt.row)
        if isinstance(api_job, BatchStatus):
            items = self._pages.store_items(attempt, api_job)
            closed = self._dead_letter(attempt, _failure_record("batch failed", None))
            return replace(closed, items_dead_lettered=items_dead(items or {}))
        if api_job.error is None or not api_job.error.retryable:
            return self._dead_letter(attempt, _failure_record("not retryable", api_job))
        resubmission = self._resubmitter.resubmit(api_job, attempt)
        if resubmission is None:
            return self._dead_letter(attempt, _failure_record("resubmission budget spent", api_job))
        detail = {
            DETAIL_RESUBMITTED_AS: resubmission.job_id,
            "adopted": str(resubmission.adopted).lower(),
        }
        # The item or run this job is followed for goes on with the new job, before this closes.
        hand_on(self._ledger, attempt.row, attempt.owner, resubmission.job_id)
        self._ledger.finish(attempt.key, attempt.owner, Outcome.RESUBMITTED, detail)
        return Disposition(MessageOutcome.RESUBMITTED, detail=resubmission.job_id)

    # -- a batch's or crawl's retried items --------------------------------------------------

    def _retrying(self, attempt: Attempt, items: Mapping[str, str]) -> Disposition:
        """Every page stored, some items retrying: settle what has settled already (the row
        read back with this attempt's notes on it)."""
        pages = int(items[DETAIL_PAGES])
        row = self._ledger.settle_items(
            attempt.key,
            attempt.owner,
            settled=frozenset(),
            counts=(
                int(items["items_stored"]),
                int(items["items_failed"]),
                int(items[DETAIL_CANCELLED]),
            ),
            pages=pages,
        )
        settled = self._settle_items(attempt, row)
        return replace(settled, items_retried=int(items[DETAIL_RETRYING]))

    def _settle_items(self, attempt: Attempt, row: LedgerRow) -> Disposition:
        """Take the retried items whose extract jobs settled off the row (their final records
        kept first); the manifest and DONE once none is left, else WATCHING until woken."""
        settled = settled_items(self._ledger, row)
        manifest = self._pages.manifest
        for record in settled.records:
            manifest.settle_retry(attempt.key, record)
        counts = settled.counts(row)
        if settled.entries:
            row = self._ledger.settle_items(
                attempt.key,
                attempt.owner,
                settled=settled.entries,
                counts=counts,
                pages=row.pages_stored,
            )
        if row.retrying_items:
            created = row.job_created_at or row.created_at
            self._ledger.watch(attempt.key, attempt.owner, job_created_at=created)
            return Disposition(MessageOutcome.ITEMS_RETRYING, detail=str(row.items_retrying))
        key = attempt.key
        status = manifest.kept_status(key)
        detail = {
            "prefix": result_prefix(key.kind, key.job_id),
            "items_stored": str(counts[0]),
            "items_failed": str(counts[1]),
            DETAIL_CANCELLED: str(counts[2]),
            "manifest": manifest.write(key, status),
        }
        if status.tokens_charged is not None:
            detail[DETAIL_TOKENS] = str(status.tokens_charged)
        self._retire_superseded(attempt.row)
        self._finish(attempt, Outcome.STORED, detail)
        return Disposition(MessageOutcome.STORED, items_dead_lettered=counts[1])

    def _not_settled(
        self, attempt: Attempt, api_job: Job | BatchStatus, *, woken: bool
    ) -> Disposition:
        row = attempt.row
        created = (
            api_job.created_at.timestamp()
            if isinstance(api_job, Job) and api_job.created_at
            else None
        )
        created = created or row.created_at
        if woken or self._clock.time() - created >= self.settings.watch_after_seconds:
            # A crawl that runs for days: polling it every few minutes would cost a call per
            # job per poll. Parked, it is woken by its webhook or by the reconciler.
            self._ledger.watch(attempt.key, attempt.owner, job_created_at=created)
            return Disposition(MessageOutcome.WATCHING, detail=api_job.status)
        self._ledger.release(attempt.key, attempt.owner, streak=Streak.ANSWERED)
        return Disposition(MessageOutcome.NOT_SETTLED, self._backoff(row.releases))

    # -- failures of the attempt itself ----------------------------------------------------

    def _call_failed(self, attempt: Attempt, why: str, *, not_found: bool = False) -> Disposition:
        """One more failed call in the job's run: retried after a wait that doubles with the
        run, and parked WATCHING at SICK_AFTER_FAILURES, so a job whose every GET fails while
        others succeed costs a few GETs an hour (the watch sweep's schedule), not one a retry.
        """
        row = attempt.row
        if row.failures + 1 >= self.settings.sick_after_failures:
            self._ledger.park(attempt.key, attempt.owner, not_found=not_found)
            return Disposition(MessageOutcome.PARKED, detail=why)
        self._ledger.release(attempt.key, attempt.owner, not_found=not_found, streak=Streak.FAILED)
        outcome = MessageOutcome.NOT_FOUND if not_found else MessageOutcome.API_UNAVAILABLE
        return Disposition(outcome, self._backoff(row.failures), why)

    def _failed_attempt(self, attempt: Attempt, exc: Exception) -> Disposition:
        """An unexpected error: keep the strike and the error; dead-letter at the bound."""
        error = f"{type(exc).__name__}: {exc}"
        if attempt.row.strikes >= self.settings.max_attempts:
            with contextlib.suppress(AWSUnavailableError, LeaseLostError):
                return self._poisoned(attempt, error)
        # If the release fails, the lease expires on its own; the strike stays, so the bound holds.
        with contextlib.suppress(AWSUnavailableError, LeaseLostError):
            self._ledger.release(attempt.key, attempt.owner, error=error)
        return Disposition(MessageOutcome.FAILED_ATTEMPT, self._backoff(attempt.row.strikes), error)

    def _retire_superseded(self, row: LedgerRow) -> None:
        # A reopened job that ends other than stored: the record it was first closed with no
        # longer speaks for it. Retired before the outcome is written, so a dead letter for
        # another reason is the live record (a retry retires and writes it again: S3 keeps the
        # history, one live record).
        superseded = row.detail.get("superseded")
        if superseded:
            self._results.retire(superseded)

    def _poisoned(self, attempt: Attempt, error: str | None) -> Disposition:
        self._retire_superseded(attempt.row)
        record = {
            "reason": REASON_POISON,
            "attempts": str(attempt.row.strikes),
            # No error recorded: the attempts were killed (a timeout, out of memory).
            "last_error": error or "attempt did not finish (timeout or crash)",
        }
        self._dead_letter(attempt, record)
        return Disposition(MessageOutcome.POISONED, detail=record["last_error"])

    def _dead_letter(self, attempt: Attempt, record: Mapping[str, Any]) -> Disposition:
        key = attempt.key
        where = self._results.dead_letter(key.kind, key.job_id, {"job_id": key.job_id, **record})
        reason = str(record.get("reason", ""))
        url = record.get("url")
        self._finish(
            attempt,
            Outcome.DEAD_LETTERED,
            {"record": where, "reason": reason},
            url=url if isinstance(url, str) else None,
        )
        return Disposition(MessageOutcome.DEAD_LETTERED, detail=reason)

    # -- helpers ---------------------------------------------------------------------------

    def _finish(
        self,
        attempt: Attempt,
        outcome: Outcome,
        detail: dict[str, str],
        *,
        url: str | None = None,
        keys: list[str] | None = None,
        job: Job | None = None,
    ) -> None:
        """DONE with ``outcome``, its event in the same write (the outbox), held for the emit."""
        now = self._clock.time()
        settled = job.completed_at.timestamp() if job is not None and job.completed_at else None
        event = outcome_event(
            attempt.key,
            outcome,
            reopens=attempt.row.reopens,
            finished_at=now,
            settled_at=settled,
            bucket=self._results.bucket,
            detail=detail,
            url=url,
            keys=keys,
            run=attempt.row.run,
        )
        if self._emitter is None or event is None:
            self._ledger.finish(attempt.key, attempt.owner, outcome, detail)
        else:
            text = event.to_json()
            row = self._ledger.finish(attempt.key, attempt.owner, outcome, detail, event=text)
            self._emitter.add(attempt.key, told_with_run(self._ledger, row, text), now)
        self._wake_parent(attempt.row)

    def _wake_parent(self, row: LedgerRow) -> None:
        """A retried item's extract job settled for good: its batch or crawl settles it now.
        If the message cannot be sent, the watch sweep wakes the batch on its own schedule."""
        ref = RetryRef.read(row.retry_of)
        if ref is None or self._waker is None:
            return
        with contextlib.suppress(AWSUnavailableError):
            self._waker(ref.parent)

    def _backoff(self, tries: int) -> int:
        wait = self.settings.retry_base_seconds * 2 ** min(max(tries, 0), 20)
        return self._seconds(min(wait, self.settings.retry_max_seconds))

    @staticmethod
    def _seconds(wait: float) -> int:
        return max(1, min(MAX_VISIBILITY_SECONDS, math.ceil(wait)))

    def _release_quietly(self, attempt: Attempt) -> None:
        # If this fails too, the lease expires on its own and the job is retaken then.
        with contextlib.suppress(AWSUnavailableError, LeaseLostError):
            self._ledger.release(attempt.key, attempt.owner)


def _failure_record(reason: str, api_job: Job | None) -> dict[str, Any]:
    """The dead-letter record of a failed job: why, and the API's error and URL if it said."""
    error = api_job.error if api_job is not None else None
    return {
        "reason": reason,
        "code": error.code if error else None,
        "message": error.message if error else None,
        "url": api_job.url if api_job is not None else None,
    }
