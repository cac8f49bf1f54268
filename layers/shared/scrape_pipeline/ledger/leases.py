"""The processor's writes (a job's lease, its holder's moves, the jobs it links) and bulk reads;
``struck_by``: attempts since the last progress not ended cleanly, ``failures``: failed calls."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobState, Outcome, Source
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import Condition, Field, Update, state_is
from scrape_pipeline.ledger.rows import LedgerRow, encode, from_item
from scrape_pipeline.ledger.table import (
    ConditionFailedError,
    LedgerError,
    LedgerTable,
    call,
    in_state,
)

# The outcome's event as told for a run (None: none), built when the write learns the run.
type Telling = Callable[[str | None], str]
_ITEM_COUNTS = (Attr.ITEMS_STORED, Attr.ITEMS_FAILED, Attr.ITEMS_CANCELLED)
# Long enough to say what failed, short enough to keep a row far below DynamoDB's 400 KB.
MAX_ERROR_CHARS = 500


class Streak(StrEnum):
    """What one attempt's API call did to the job's run of consecutive failed calls."""

    KEEP = "keep"  # no call, or one that says nothing about the job (429, our own AWS)
    FAILED = "failed"  # a 5xx, a timeout, a 404 of a proven job: one more in the run
    ANSWERED = "answered"  # the API answered the job's state: the run is over


def _with_streak(update: Update, streak: Streak, now: float) -> Update:
    if streak is Streak.FAILED:
        return update.increment(Attr.FAILURES).set_default(Attr.FAILING_SINCE, now)
    if streak is Streak.ANSWERED:
        return update.remove(Attr.FAILURES, Attr.FAILING_SINCE)
    return update


def _parked(state: JobState, now: float) -> Update:
    return in_state(state, now).remove(Attr.LEASE_OWNER, Attr.LEASE_UNTIL)


class LeaseLostError(LedgerError):
    """The caller no longer holds the job's lease; ``row`` is the row as it is now."""

    def __init__(self, key: JobKey, row: LedgerRow | None) -> None:
        super().__init__(f"lease on {key.pk} is not held")
        self.key = key
        self.row = row


@dataclass(frozen=True)
class LeaseResult:
    """``acquire``'s result: the new row when granted, else the old one."""

    granted: bool
    row: LedgerRow | None


class Leases(LedgerTable):
    """The processor's writes (one attempt's lease taken, then moved only by its holder; the jobs
    it links to runs and retried items) and its bulk reads."""

    def acquire(self, key: JobKey, owner: str, lease_seconds: float, *, source: str) -> LeaseResult:
        """Take the job's lease (from a waiting state, an expired lease, or no row: ``source``'s);
        the attempt holds a strike until it ends cleanly or stores a page."""
        now = self.clock.time()
        update = (
            in_state(JobState.PROCESSING, now)
            .set(Attr.LEASE_OWNER, owner)
            .set(Attr.LEASE_UNTIL, now + lease_seconds)
            .increment(Attr.ATTEMPTS)
            .set_default(Attr.KIND, key.kind)
            .set_default(Attr.JOB_ID, key.job_id)
            .set_default(Attr.CREATED_AT, now)
            .set_default(Attr.SOURCE, source)
            .add(Attr.STRUCK_BY, {owner})
        )
        condition = state_is(lifecycle.ACQUIRE) | (
            state_is(lifecycle.TAKE_OVER) & Field(Attr.LEASE_UNTIL).lt(now)
        )
        try:
            return LeaseResult(True, self._update(key, condition, update, now))
        except ConditionFailedError as refused:
            # The processor's role has no GetItem: the refusal's old row is the one read.
            return LeaseResult(False, from_item(refused.old) if refused.old else None)

    def release(
        self,
        key: JobKey,
        owner: str,
        *,
        error: str | None = None,
        not_found: bool = False,
        streak: Streak = Streak.KEEP,
    ) -> LedgerRow:
        """Give the lease back, the job still to do: the strike taken back, or kept with
        ``error`` (a poison job may repeat it)."""
        now = self.clock.time()
        update = _parked(JobState.ENQUEUED, now).increment(Attr.RELEASES)
        if error is None:
            update.delete(Attr.STRUCK_BY, {owner})
        else:
            update.set(Attr.LAST_ERROR, error[:MAX_ERROR_CHARS])
        if not_found:
            update.increment(Attr.NOT_FOUND)
        update = _with_streak(update, streak, now)
        return self._leased_update(key, owner, lifecycle.RELEASE, update, now)

    def watch(
        self,
        key: JobKey,
        owner: str,
        *,
        job_created_at: float | None = None,
        not_found: bool = False,
    ) -> LedgerRow:
        """Park the job WATCHING, no lease, no message, the strike taken back: a long-running job
        (``job_created_at``: the API answered) or, without it, one whose calls keep failing."""
        now = self.clock.time()
        update = _parked(JobState.WATCHING, now).delete(Attr.STRUCK_BY, {owner})
        if job_created_at is None:
            update = _with_streak(update, Streak.FAILED, now)  # a sick API is no poison job
        else:
            update.set(Attr.JOB_CREATED_AT, float(job_created_at))
            update = _with_streak(update, Streak.ANSWERED, now)
        if not_found:
            update.increment(Attr.NOT_FOUND)
        return self._leased_update(key, owner, lifecycle.WATCH, update, now)

    def checkpoint(
        self,
        key: JobKey,
        owner: str,
        *,
        next_page: int,
        stored: int,
        failed: int,
        page_seconds: float = 0.0,
        next_item: int = 0,
        cancelled: int = 0,
    ) -> LedgerRow:
        """A batch's or crawl's progress after a page (or ``next_item`` of it) is stored, the
        lease kept: progress clears every strike."""
        update = (
            Update()
            .set(Attr.NEXT_PAGE, next_page)
            .set(Attr.NEXT_ITEM, next_item)
            .set(Attr.ITEMS_STORED, stored)
            .set(Attr.ITEMS_FAILED, failed)
            .set(Attr.PAGE_SECONDS, float(page_seconds))
            .remove(Attr.STRUCK_BY)
        )
        if cancelled:
            update.set(Attr.ITEMS_CANCELLED, cancelled)
        return self._leased_update(key, owner, lifecycle.CHECKPOINT, update, self.clock.time())

    def note_item_retry(
        self,
        key: JobKey,
        owner: str,
        index: int,
        retry: str | None = None,
        *,
        posting: bool = False,
    ) -> LedgerRow:
        """Item ``index``'s retry: its POST under way (``posting``), answered with a job
        (``retry``: ``<index>:<job id>``), or neither: it certainly did nothing."""
        update = Update()
        now = self.clock.time()
        if posting:
            update.add(Attr.RETRY_POSTING, {str(index)}).set(Attr.POSTED_AT, now)
        else:
            update.delete(Attr.RETRY_POSTING, {str(index)})
        if retry is not None:
            update.add(Attr.RETRYING_ITEMS, {retry})
        return self._leased_update(key, owner, lifecycle.NOTE_ITEM_RETRY, update, now)

    def note_resubmission(self, key: JobKey, owner: str, job_id: str) -> LedgerRow:
        """Note the job that resubmits a held row ahead of its close: its batch or run follows."""
        update = Update().set(Attr.DETAIL, {DETAIL_RESUBMITTED_AS: job_id})
        now = self.clock.time()
        return self._leased_update(key, owner, lifecycle.NOTE_RESUBMISSION, update, now)

    def note_posting(self, key: JobKey, owner: str, *, posting: bool) -> LedgerRow:
        """Note that a held row's resubmission POST is about to be sent, or (not ``posting``)
        that it certainly did nothing."""
        now = self.clock.time()
        update = Update().set(Attr.POSTED_AT, now) if posting else Update().remove(Attr.POSTED_AT)
        return self._leased_update(key, owner, lifecycle.NOTE_RESUBMISSION, update, now)

    def settle_items(
        self,
        key: JobKey,
        owner: str,
        *,
        settled: frozenset[str],
        counts: tuple[int, int, int],
        pages: int,
    ) -> LedgerRow:
        """Take settled retries off the row, with the item counts (stored, dead-lettered,
        cancelled) once all ``pages`` are stored."""
        update = Update().set(Attr.PAGES_STORED, pages)
        for attr, count in zip(_ITEM_COUNTS, counts, strict=True):
            update.set(attr, count)
        if settled:
            update.delete(Attr.RETRYING_ITEMS, settled)
        now = self.clock.time()
        return self._leased_update(key, owner, lifecycle.SETTLE_ITEMS, update, now)

    def finish(
        self,
        key: JobKey,
        owner: str,
        outcome: Outcome,
        detail: Mapping[str, str] | None = None,
        *,
        event: str | Telling | None = None,
        run: str | None = None,
    ) -> LedgerRow:
        """The job DONE with its outcome and ``event`` (the outbox); a ``Telling`` event is told
        for ``run`` as read (the condition): a run linked since is told on the refusal."""
        now = self.clock.time()
        update = (
            Update()
            .set(Attr.STATE, JobState.DONE)
            .set(Attr.OUTCOME, outcome)
            .set(Attr.FINISHED_AT, now)
            .set(Attr.DETAIL, detail or {})
            .remove(Attr.PENDING_STATE, Attr.LEASE_OWNER, Attr.LEASE_UNTIL)
        )
        if callable(event):
            return self._finish_told(key, owner, update, now, tell=event, run=run)
        if event is not None:
            update.set(Attr.OUTBOX_AT, now).set(Attr.OUTBOX_EVENT, event)
        return self._leased_update(key, owner, lifecycle.FINISH, update, now)

    def _finish_told(
        self, key: JobKey, owner: str, update: Update, now: float, *, tell: Telling, run: str | None
    ) -> LedgerRow:
        for _ in range(3):
            update.set(Attr.OUTBOX_AT, now).set(Attr.OUTBOX_EVENT, tell(run))
            named = Field(Attr.RUN).not_exists() if run is None else Field(Attr.RUN).eq(run)
            try:
                return self._leased_update(key, owner, lifecycle.FINISH, update, now, guard=named)
            except LeaseLostError as lost:
                run = _linked_run(lost, owner, run)
        raise LeaseLostError(key, None)

    def link_retry(self, key: JobKey, item: str, *, run: str | None = None) -> bool:
        """Link an extract job that retries a batch's or crawl's ``item`` to it (and to
        ``run``): recorded WATCHING if it has no row yet; the first link stands."""
        now = self.clock.time()
        created = self._watched(key, now).set(Attr.RETRY_OF, item)
        linked = Update().set(Attr.RETRY_OF, item)
        if run is not None:
            created, linked = created.set(Attr.RUN, run), linked.set(Attr.RUN, run)
        if self._moved(key, lifecycle.LINK_NEW_RETRY, created, Field(Attr.PK).not_exists(), now):
            return True
        unlinked = Field(Attr.RETRY_OF).not_exists()
        return self._moved(key, lifecycle.LINK_RETRY, linked, unlinked, now) is not None

    def carry_run(self, key: JobKey, run: str) -> LedgerRow:
        """Name ``run`` on the row of a job that resubmits one of the run's (recorded WATCHING
        if it has none yet) unless it names another run: the row as it is then."""
        now = self.clock.time()
        created = self._watched(key, now).set(Attr.RUN, run)
        unnamed = Field(Attr.RUN).not_exists() | Field(Attr.RUN).eq(run)
        for _ in range(2):  # a row undone between the two (``forget_unsent``): created again
            with contextlib.suppress(ConditionFailedError):
                return self._update(key, state_is(lifecycle.CARRY_NEW_RUN), created, now)
            try:
                condition = state_is(lifecycle.CARRY_RUN) & unnamed
                return self._update(key, condition, Update().set(Attr.RUN, run), now)
            except ConditionFailedError as refused:
                if refused.old is not None:
                    return from_item(refused.old)
        raise LedgerError(f"{key.pk} neither absent nor present while its run was carried")

    def _watched(self, key: JobKey, now: float) -> Update:
        """The new row of a job posted a moment ago, waiting WATCHING for its webhook."""
        update = Update().set(Attr.JOB_CREATED_AT, now)
        for attr, value in self.new_values(key, now, Source.SUBMITTED, JobState.WATCHING).items():
            update.set(attr, value)
        return update

    def get_many(self, keys: Iterable[JobKey]) -> dict[JobKey, LedgerRow]:
        """The rows of ``keys`` (missing jobs are absent), a hundred keys a BatchGetItem."""
        return {row.key: row for row in map(from_item, self.batch_items([k.pk for k in keys]))}

    def batch_items(self, pks: Iterable[str]) -> list[dict[str, Any]]:
        """The raw items of ``pks``, a hundred keys a BatchGetItem (and its retries)."""
        keys = [{Attr.PK.value: encode(pk)} for pk in dict.fromkeys(pks)]
        chunks = (keys[start : start + 100] for start in range(0, len(keys), 100))
        return [item for chunk in chunks for item in self._read(chunk)]

    def _read(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        request: Any = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
        items: list[dict[str, Any]] = []
        for _ in range(8):  # unprocessed keys come back under load: ask for them again
            response = call(self.client, "BatchGetItem", RequestItems=request)
            items += response.get("Responses", {}).get(self.table_name, [])
            if not (request := response.get("UnprocessedKeys")):
                return items
        raise AWSUnavailableError("dynamodb", "BatchGetItem", "UnprocessedKeys")

    def _leased_update(
        self,
        key: JobKey,
        owner: str,
        move: lifecycle.Move,
        update: Update,
        now: float,
        *,
        guard: Condition | None = None,
    ) -> LedgerRow:
        """``move`` by the lease holder ``owner``, else ``LeaseLostError``."""
        condition = state_is(move) & Field(Attr.LEASE_OWNER).eq(owner)
        if guard is not None:
            condition &= guard
        try:
            return self._update(key, condition, update, now)
        except ConditionFailedError as refused:
            raise LeaseLostError(key, from_item(refused.old) if refused.old else None) from refused


def _linked_run(lost: LeaseLostError, owner: str, run: str | None) -> str | None:
    """The run linked since to a row ``owner`` still holds; else ``lost`` raised."""
    if lost.row is None or lost.row.lease_owner != owner or lost.row.run == run:
        raise lost
    return lost.row.run


def new_owner_id(prefix: str = "") -> str:
    """A lease owner id unique to one processing attempt."""
    return f"{prefix}{uuid.uuid4().hex}"
