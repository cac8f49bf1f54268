"""The writes that bring a job in or back: record, forget_unsent, enqueue, reopen, unclaim.

The one way out of DONE is ``reopen``: a job closed because the API did not know it or it did
not settle in time is reopened by evidence that it has settled (its webhook, the job list, the
delivery log), with a condition on the exact row that was closed (and put back to that close
by ``unclaim`` if the message it calls for cannot be sent). A job is reopened at most
``max_reopens`` times (``reopens`` counts them), and a webhook reopens or wakes a job only
with a delivery id the row has not kept (``seen_deliveries``: the ids of the deliveries that
created, reopened or woke it), so a replayed delivery never makes work twice.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import SOURCE_SUBMITTED, JobKey, JobState, Outcome
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.errors import ConditionFailedError, LedgerError
from scrape_pipeline.ledger.expressions import (
    Condition,
    Update,
    any_of,
    equals,
    expressions,
    lacks,
    missing,
    state_is,
)
from scrape_pipeline.ledger.reads import Reads
from scrape_pipeline.ledger.rows import Item, LedgerRow, from_item, to_item
from scrape_pipeline.ledger.table import _write, call, in_state


@dataclass(frozen=True)
class Recorded:
    """The result of ``Ledger.record``: ``created`` is False when the job was known already."""

    created: bool
    row: LedgerRow


def _with_evidence(
    update: Update, guard: Condition, evidence: str | None
) -> tuple[Update, Condition]:
    """``update`` and ``guard`` that also keep ``evidence`` (a delivery id) among the row's
    deliveries seen, and hold only if it is not there yet; unchanged without one."""
    if evidence is None:
        return update, guard
    return (
        update.add(Attr.SEEN_DELIVERIES, {evidence}),
        guard & lacks(Attr.SEEN_DELIVERIES, evidence),
    )


class Intake(Reads):
    """The receiver's and the reconciler's writes: a job's row created, enqueued, put back."""

    def record(
        self,
        key: JobKey,
        *,
        source: str,
        state: JobState = JobState.RECEIVED,
        detail: Mapping[str, str] | None = None,
        job_created_at: float | None = None,
        delivery_id: str | None = None,
    ) -> Recorded:
        """Create the job's row unless it exists; the old row comes back when it does.

        A job seen running for long is recorded WATCHING, with its own ``job_created_at``; a
        webhook's ``delivery_id`` is kept as evidence seen.
        """
        item = self.new_row(
            key,
            now=self.clock.time(),
            source=source,
            state=state,
            detail=detail,
            job_created_at=job_created_at,
            delivery_id=delivery_id,
        )
        return self.put_new(key, item)

    def put_new(self, key: JobKey, item: Item) -> Recorded:
        """Put a new row's ``item`` (``new_row``) unless the job's row exists."""
        try:
            _write(self._db, self.table_name, "PutItem", state_is(lifecycle.RECORD), item=item)
        except ConditionFailedError as refused:
            return Recorded(False, from_item(refused.old) if refused.old else self._must_get(key))
        return Recorded(True, from_item(item))

    def submitted_row(self, key: JobKey, now: float, *, run: str | None = None) -> Item:
        """The new row of a job just submitted whose webhook the pipeline waits for: WATCHING,
        nothing enqueued (``submissions.expect``); ``run``: the run whose journal has it."""
        item = self.new_row(
            key, now=now, source=SOURCE_SUBMITTED, state=JobState.WATCHING, job_created_at=now
        )
        return item if run is None else {**item, **to_item({Attr.RUN: run})}

    def submitted_put(self, key: JobKey, now: float, *, run: str | None = None) -> dict[str, Any]:
        """``submitted_row`` as a ``TransactWriteItems`` Put, under ``record``'s condition (no
        row yet): a run journal records a job id and announces its job in one transaction."""
        condition = expressions(ConditionExpression=state_is(lifecycle.RECORD))
        item = self.submitted_row(key, now, run=run)
        return {"TableName": self.table_name, "Item": item, **condition}

    def link_run(self, key: JobKey, run: str) -> bool:
        """Name ``run`` on the job's row if there is one; False if there is none."""
        try:
            call(self._db, "UpdateItem", **self.link_run_update(key, run))
        except ConditionFailedError:
            return False
        return True

    def link_run_update(self, key: JobKey, run: str) -> dict[str, Any]:
        """``link_run`` as a ``TransactWriteItems`` Update, for a row that exists (its webhook
        came before the journal's write): only ``run`` is written, so a settled row keeps its
        state and stays out of the pending index."""
        request = expressions(
            UpdateExpression=Update().set(Attr.RUN, run),
            ConditionExpression=state_is(lifecycle.LINK_RUN),
        )
        return {"TableName": self.table_name, "Key": {Attr.PK.value: {"S": key.pk}}, **request}

    def new_row(
        self,
        key: JobKey,
        *,
        now: float,
        source: str,
        state: JobState = JobState.RECEIVED,
        detail: Mapping[str, str] | None = None,
        job_created_at: float | None = None,
        delivery_id: str | None = None,
    ) -> Item:
        """The item ``record`` puts for a new row."""
        if state not in lifecycle.RECORD.targets:
            *others, last = (s.value for s in lifecycle.RECORD.targets)
            raise ValueError(f"a new row starts {', '.join(others)} or {last}, not {state}")
        return to_item(
            {
                Attr.PK: key.pk,
                Attr.KIND: key.kind,
                Attr.JOB_ID: key.job_id,
                Attr.STATE: state,
                Attr.PENDING_STATE: state,
                Attr.STATE_SINCE: now,
                Attr.CREATED_AT: now,
                Attr.UPDATED_AT: now,
                Attr.EXPIRES_AT: self.expiry(now),
                Attr.SOURCE: source,
                # Lets the writer undo its own row, and only its own (forget_unsent).
                Attr.TOKEN: uuid.uuid4().hex,
                Attr.ATTEMPTS: 0,
                Attr.DETAIL: detail or None,
                Attr.JOB_CREATED_AT: job_created_at,
                Attr.SEEN_DELIVERIES: None if delivery_id is None else {delivery_id},
            }
        )

    def forget_unsent(self, row: LedgerRow) -> bool:
        """Delete a row its writer could not enqueue, so no orphan is left; False if it moved on."""
        condition = state_is(lifecycle.FORGET_UNSENT) & equals(Attr.TOKEN, row.token or "")
        try:
            _write(self._db, self.table_name, "DeleteItem", condition, pk=row.key.pk)
        except ConditionFailedError:
            return False
        return True

    def mark_enqueued(self, row: LedgerRow) -> bool:
        """Move a RECEIVED, ENQUEUED or WATCHING row to ENQUEUED (now), if unmoved since ``row``.

        The condition on ``state_since`` makes concurrent re-enqueuers agree on one winner.
        """
        return self.enqueue(row) is not None

    def enqueue(self, row: LedgerRow, *, evidence: str | None = None) -> LedgerRow | None:
        """``mark_enqueued``, returning the row as written (``unclaim`` puts it back) or None.

        With ``evidence`` (a webhook's delivery id), only if the row has not seen it: it is
        kept, so a replay of the same delivery moves nothing.
        """
        if row.has_seen(evidence):
            return None
        now = self.clock.time()
        update = in_state(JobState.ENQUEUED, now)
        # Only waiting rows may move here, whatever snapshot a caller holds (the table's
        # from-states): a DONE row must never leave DONE this way, a leased one belongs to
        # its holder.
        guard = equals(Attr.STATE, row.state) & equals(Attr.STATE_SINCE, row.state_since)
        update, guard = _with_evidence(update, guard, evidence)
        if not self._moved(row.key, lifecycle.ENQUEUE, update, guard, now):
            return None
        return replace(
            row, state=JobState.ENQUEUED, state_since=now, seen_deliveries=row.seen_with(evidence)
        )

    def reopen(self, row: LedgerRow, *, evidence: str | None = None) -> bool:
        """Bring a job closed as "never settled" or "unknown" back to ENQUEUED; False if moved.

            DONE dead_lettered (reason in REOPENABLE_REASONS, finished at T, reopened n times)
              └─ evidence the job settled, n < max_reopens, not seen before
                   ─▶ ENQUEUED, counters reset, reopens n + 1,
                      detail.superseded = the dead-letter record

        The condition is on the very row the caller read (state, outcome, finish time), so of
        several pieces of evidence arriving at once exactly one reopens it. ``evidence`` is a
        webhook's delivery id: kept, so that delivery replayed reopens nothing again.
        """
        return self.reopened(row, evidence=evidence) is not None

    def reopened(self, row: LedgerRow, *, evidence: str | None = None) -> LedgerRow | None:
        """``reopen``, returning the row as written (``unclaim`` puts it back) or None."""
        if not row.reopenable or row.finished_at is None or row.reopens >= self.max_reopens:
            return None
        if row.has_seen(evidence):
            return None
        now = self.clock.time()
        detail = {"reopened": row.detail.get("reason", "")}
        if row.detail.get("record"):
            detail["superseded"] = row.detail["record"]
        update = (
            in_state(JobState.ENQUEUED, now)
            .set(Attr.DETAIL, detail)
            .set(Attr.NOT_FOUND, 0)
            .set(Attr.RELEASES, 0)
            .set(Attr.REOPENS, row.reopens + 1)
            .remove(
                Attr.OUTCOME,
                Attr.FINISHED_AT,
                Attr.LAST_ERROR,
                Attr.STRUCK_BY,
                Attr.FAILURES,
                Attr.FAILING_SINCE,
            )
        )
        guard = (
            equals(Attr.OUTCOME, Outcome.DEAD_LETTERED)
            & equals(Attr.FINISHED_AT, row.finished_at)
            # The count as read: a concurrent reopen moved finished_at anyway.
            & any_of(missing(Attr.REOPENS), equals(Attr.REOPENS, row.reopens))
        )
        update, guard = _with_evidence(update, guard, evidence)
        if not self._moved(row.key, lifecycle.REOPEN, update, guard, now):
            return None
        return replace(
            row,
            state=JobState.ENQUEUED,
            state_since=now,
            outcome=None,
            finished_at=None,
            detail=detail,
            strikes=0,
            not_found=0,
            releases=0,
            last_error=None,
            reopens=row.reopens + 1,
            seen_deliveries=row.seen_with(evidence),
        )

    def unclaim(self, before: LedgerRow, written: LedgerRow) -> bool:
        """Put back a row moved to ENQUEUED (``enqueue``, ``reopened``) whose message could not
        be sent, if it is still exactly as ``written``; False if it moved on since.

            before ──enqueue/reopened──▶ written (ENQUEUED at T) ──send fails──▶ before again

        The sender's retry (or the next reconciler run) then finds the row as it was and
        enqueues it anew, instead of a row that waits for the stale-row sweep with no message.
        """
        if before.state not in lifecycle.UNCLAIM.targets:
            raise ValueError(f"unclaim puts no row back to {before.state}")
        if before.is_done:
            # A reopen undone: the close it overturned, as it was (the row leaves the index).
            # The reopen's count too: one that sent nothing must not use up the bound (the
            # sender's retry, with a delivery id of its own, reopens it again).
            update = (
                Update()
                .set(Attr.STATE, before.state)
                .set(Attr.STATE_SINCE, before.state_since)
                .set(Attr.OUTCOME, before.outcome or Outcome.DEAD_LETTERED)
                .set(Attr.FINISHED_AT, before.finished_at or before.state_since)
                .set(Attr.DETAIL, before.detail)
                .set(Attr.NOT_FOUND, before.not_found)
                .set(Attr.RELEASES, before.releases)
                .set(Attr.REOPENS, before.reopens)
                .remove(Attr.PENDING_STATE)
            )
        else:
            update = in_state(before.state, before.state_since)
        added = written.seen_deliveries - before.seen_deliveries
        if added:
            # Evidence that moved nothing in the end: not seen. Where one id serves every
            # retry of an event (Stripe's evt_, Standard Webhooks' msg_), the retry that this
            # write's 503 asks for must be able to move the row again.
            update = update.delete(Attr.SEEN_DELIVERIES, added)
        guard = equals(Attr.STATE_SINCE, written.state_since)
        return self._moved(before.key, lifecycle.UNCLAIM, update, guard, self.clock.time())

    def link_retry(self, key: JobKey, item: str, *, run: str | None = None) -> bool:
        """Link an extract job that retries a batch's or crawl's ``item`` (``<kind>#<job
        id>#<index>``) to it, naming ``run`` (the batch's) too; True when this call linked it.

        No row yet (the usual case: the job was posted a moment ago): recorded WATCHING as a
        submission is, so its webhook or the watch sweep wakes it. A row already there (its
        webhook came first) is linked whatever its state; the first link stands. UpdateItem
        both ways: the processor, which links, puts no item.
        """
        now = self.clock.time()
        created = self._watched(key, now).set(Attr.RETRY_OF, item)
        linked = Update().set(Attr.RETRY_OF, item)
        if run is not None:
            created, linked = created.set(Attr.RUN, run), linked.set(Attr.RUN, run)
        if self._moved(key, lifecycle.LINK_NEW_RETRY, created, missing(Attr.PK), now):
            return True
        return self._moved(key, lifecycle.LINK_RETRY, linked, missing(Attr.RETRY_OF), now)

    def carry_run(self, key: JobKey, run: str) -> LedgerRow:
        """Name ``run`` on the row of a job that resubmits one of the run's: recorded WATCHING
        as a submission is if it has no row yet, else only ``run`` written, unless the row
        names another run (an adopted job another run made: that run stands). The row as it
        is then (a settled one owes its event again, naming the run: ``retell``)."""
        now = self.clock.time()
        created = self._watched(key, now).set(Attr.RUN, run)
        unnamed = missing(Attr.RUN) | equals(Attr.RUN, run)
        for _ in range(2):  # a row undone between the two (``forget_unsent``): created again
            with contextlib.suppress(ConditionFailedError):
                condition = state_is(lifecycle.CARRY_NEW_RUN) & missing(Attr.PK)
                return from_item(
                    self._update(key, condition, created, now, returns_new=True)["Attributes"]
                )
            try:
                condition = state_is(lifecycle.CARRY_RUN) & unnamed
                named = Update().set(Attr.RUN, run)
                return from_item(
                    self._update(key, condition, named, now, returns_new=True)["Attributes"]
                )
            except ConditionFailedError as refused:
                if refused.old is not None:
                    return from_item(refused.old)
        raise LedgerError(f"{key.pk} neither absent nor present while its run was carried")

    @staticmethod
    def _watched(key: JobKey, now: float) -> Update:
        """The new row of a job posted a moment ago, waiting WATCHING for its webhook."""
        return (
            in_state(JobState.WATCHING, now)
            .set(Attr.KIND, key.kind)
            .set(Attr.JOB_ID, key.job_id)
            .set(Attr.CREATED_AT, now)
            .set(Attr.SOURCE, SOURCE_SUBMITTED)
            .set(Attr.TOKEN, uuid.uuid4().hex)
            .set(Attr.ATTEMPTS, 0)
            .set(Attr.JOB_CREATED_AT, now)
        )

    def note_late_webhook(self, row: LedgerRow) -> bool:
        """Record that a webhook came for a job recovered without it; True the first time only.

        The reconciler's count of recovered jobs mixes webhooks that never came with webhooks
        that were only late; this mark (one write per such job, not per delivery) tells them
        apart.
        """
        now = self.clock.time()
        update = Update().set(Attr.LATE_WEBHOOK_AT, now)
        guard = missing(Attr.LATE_WEBHOOK_AT)
        return self._moved(row.key, lifecycle.NOTE_LATE_WEBHOOK, update, guard, now)

    def _moved(
        self, key: JobKey, move: lifecycle.Move, update: Update, guard: Condition, now: float
    ) -> bool:
        """``move``, if ``guard`` holds too, written at ``now``; False if refused."""
        try:
            self._update(key, state_is(move) & guard, update, now)
        except ConditionFailedError:
            return False
        return True

    def _must_get(self, key: JobKey) -> LedgerRow:
        row = self.get(key)
        if row is None:  # deleted between the failed put and this read: a forgotten orphan
            raise LedgerError(f"{key.pk} vanished while being recorded")
        return row
