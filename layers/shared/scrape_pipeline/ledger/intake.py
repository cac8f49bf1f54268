"""The writes that bring a job in or back: record, enqueue, reopen (the one way out of DONE,
at most ``max_reopens`` times), their undoing; each webhook's delivery id moves a row once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scrape_pipeline.jobs import JobKey, JobState, Outcome, Source
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.evidence import (
    Decision,
    Evidence,
    Policy,
    Seen,
    Why,
    webhook_decision,
)
from scrape_pipeline.ledger.expressions import Condition, Field, Update, state_is
from scrape_pipeline.ledger.rows import Item, LedgerRow, from_item, to_item
from scrape_pipeline.ledger.table import (
    ConditionFailedError,
    LedgerError,
    LedgerTable,
    in_state,
    write,
)


@dataclass(frozen=True)
class Recorded:
    """``record``'s result: ``created`` is False when the job was known already."""

    created: bool
    row: LedgerRow


@dataclass(frozen=True)
class Taken:
    """What a webhook did: why, the row before (None: recorded new) and as written (None:
    nothing to send or undo)."""

    why: Why
    before: LedgerRow | None = None
    written: LedgerRow | None = None


def _with_evidence(
    update: Update, guard: Condition, evidence: str | None
) -> tuple[Update, Condition]:
    """``update`` and ``guard`` that keep ``evidence`` (a delivery id) as seen, if not seen yet."""
    if evidence is None:
        return update, guard
    seen = ~Field(Attr.SEEN_DELIVERIES).contains(evidence)
    return update.add(Attr.SEEN_DELIVERIES, {evidence}), guard & seen


def _reopened_detail(row: LedgerRow) -> dict[str, str]:
    """A reopened row's detail: the reason it was closed, and the record it supersedes."""
    detail = {"reopened": row.detail.get("reason", "")}
    if row.detail.get("record"):
        detail["superseded"] = row.detail["record"]
    return detail


def _check_new(state: JobState) -> None:
    if state not in lifecycle.RECORD.targets:
        *others, last = (s.value for s in lifecycle.RECORD.targets)
        raise ValueError(f"a new row starts {', '.join(others)} or {last}, not {state}")


def _closed_again(before: LedgerRow) -> Update:
    """A reopen undone: the close it overturned and its count (one that sent nothing is free)."""
    return (
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


class Intake(LedgerTable):
    """The receiver's and the reconciler's writes: a job's row created, enqueued, put back."""

    def take_webhook(
        self, key: JobKey, *, delivery_id: str | None, detail: Mapping[str, str], policy: Policy
    ) -> Taken:
        """A verified delivery for ``key`` decided and written; the caller sends ``written``."""
        # No read first: the conditional put is ``decide``'s "no row" line, made atomically.
        recorded = self.record(key, source=Source.WEBHOOK, detail=detail, delivery_id=delivery_id)
        if recorded.created:
            return Taken(Why.NEW, written=recorded.row)
        row = recorded.row
        evidence = Evidence(Seen.WEBHOOK, Source.WEBHOOK, delivery_id)
        decision = webhook_decision(row, evidence, self.clock.time(), policy)
        if (written := self._make(decision.move, row, delivery_id)) is not None:
            return Taken(decision.why, row, written)
        return self._instead(decision.otherwise or decision, row)

    def _instead(self, decision: Decision, row: LedgerRow) -> Taken:
        if decision.move is lifecycle.NOTE_LATE_WEBHOOK and self.note_late_webhook(row):
            return Taken(Why.LATE_WEBHOOK, row)
        return Taken(Why.DUPLICATE, row)

    def _make(
        self, move: lifecycle.Move | None, row: LedgerRow, evidence: str | None
    ) -> LedgerRow | None:
        if move is lifecycle.REOPEN:
            return self.reopened(row, evidence=evidence)
        return self.enqueue(row, evidence=evidence) if move is lifecycle.ENQUEUE else None

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
        """Create the job's row unless it exists; the old row comes back when it does."""
        _check_new(state)
        values = {
            Attr.PK: key.pk,
            **self.new_values(key, self.clock.time(), source, state),
            Attr.DETAIL: detail or None,
            Attr.JOB_CREATED_AT: job_created_at,
            Attr.SEEN_DELIVERIES: None if delivery_id is None else {delivery_id},
        }
        return self.put_new(key, to_item(values))

    def put_new(self, key: JobKey, item: Item) -> Recorded:
        """Put a new row's ``item`` unless the job's row exists."""
        try:
            write(self.client, self.table_name, state_is(lifecycle.RECORD), item=item)
        except ConditionFailedError as refused:
            if refused.old is None:  # a put refused for its key's row returns that row
                raise LedgerError(f"{key.pk} refused without its row") from refused
            return Recorded(False, from_item(refused.old))
        return Recorded(True, from_item(item))

    def forget_unsent(self, row: LedgerRow) -> bool:
        """Delete a row its writer could not enqueue (no orphan left); False if it moved on."""
        condition = state_is(lifecycle.FORGET_UNSENT) & Field(Attr.TOKEN).eq(row.token or "")
        try:
            write(self.client, self.table_name, condition, pk=row.key.pk)
        except ConditionFailedError:
            return False
        return True

    def enqueue(self, row: LedgerRow, *, evidence: str | None = None) -> LedgerRow | None:
        """A waiting row to ENQUEUED if unmoved since ``row`` (one winner) and ``evidence`` not
        seen: the row as written, or None."""
        if row.has_seen(evidence):
            return None
        now = self.clock.time()
        # The state as read too: a DONE row never leaves this way, a leased one is its holder's.
        guard: Condition = Field(Attr.STATE).eq(row.state) & Field(Attr.STATE_SINCE).eq(
            row.state_since
        )
        update, guard = _with_evidence(in_state(JobState.ENQUEUED, now), guard, evidence)
        return self._moved(row.key, lifecycle.ENQUEUE, update, guard, now)

    def reopened(self, row: LedgerRow, *, evidence: str | None = None) -> LedgerRow | None:
        """A reopenable close as read back to ENQUEUED, counters reset, reopens + 1: the row as
        written, or None."""
        if not self._may_reopen(row, evidence) or row.finished_at is None:
            return None
        now = self.clock.time()
        update = (
            in_state(JobState.ENQUEUED, now)
            .set(Attr.DETAIL, _reopened_detail(row))
            .set(Attr.NOT_FOUND, 0)
            .set(Attr.RELEASES, 0)
            .set(Attr.REOPENS, row.reopens + 1)
            .remove(Attr.OUTCOME, Attr.FINISHED_AT, Attr.LAST_ERROR, Attr.STRUCK_BY)
            .remove(Attr.FAILURES, Attr.FAILING_SINCE)
        )
        reopens = Field(Attr.REOPENS)  # the count as read
        guard: Condition = (
            Field(Attr.OUTCOME).eq(Outcome.DEAD_LETTERED)
            & Field(Attr.FINISHED_AT).eq(row.finished_at)
            & (reopens.not_exists() | reopens.eq(row.reopens))
        )
        update, guard = _with_evidence(update, guard, evidence)
        return self._moved(row.key, lifecycle.REOPEN, update, guard, now)

    def _may_reopen(self, row: LedgerRow, evidence: str | None) -> bool:
        return row.reopenable and row.reopens < self.max_reopens and not row.has_seen(evidence)

    def unclaim(self, before: LedgerRow, written: LedgerRow) -> bool:
        """Put back a row ``enqueue``/``reopened`` wrote whose message could not be sent, if
        still as ``written``."""
        update = (
            _closed_again(before) if before.is_done else in_state(before.state, before.state_since)
        )
        if added := written.seen_deliveries - before.seen_deliveries:
            # Evidence that moved nothing is not seen: the retry this 503 asks for must move it.
            update = update.delete(Attr.SEEN_DELIVERIES, added)
        guard = Field(Attr.STATE_SINCE).eq(written.state_since)
        now = self.clock.time()
        return self._moved(before.key, lifecycle.UNCLAIM, update, guard, now) is not None

    def note_late_webhook(self, row: LedgerRow) -> bool:
        """Mark a webhook come for a job recovered without it; True the first time only."""
        now = self.clock.time()
        update = Update().set(Attr.LATE_WEBHOOK_AT, now)
        guard = Field(Attr.LATE_WEBHOOK_AT).not_exists()
        return self._moved(row.key, lifecycle.NOTE_LATE_WEBHOOK, update, guard, now) is not None
