"""The writes that bring a job in or back: record, forget_unsent, enqueue, reopen, unclaim."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobKey, JobState, Outcome
from scrape_pipeline.ledger.attributes import (
    PARTITION_KEY,
    PENDING_STATE,
    REOPENS,
    SEEN_DELIVERIES,
    STATE_SINCE,
    STRUCK_BY,
    TTL_ATTRIBUTE,
)
from scrape_pipeline.ledger.errors import ConditionFailedError, LedgerError
from scrape_pipeline.ledger.expressions import _both, _stamped, _state_is, _used
from scrape_pipeline.ledger.reads import Reads
from scrape_pipeline.ledger.rows import LedgerRow, _n, _row, _s, _string_set
from scrape_pipeline.ledger.table import _write


@dataclass(frozen=True)
class Recorded:
    """The result of ``Ledger.record``: ``created`` is False when the job was known already."""

    created: bool
    row: LedgerRow


def _with_evidence(
    update: str,
    condition: str,
    evidence: str | None,
    names: dict[str, str],
    values: dict[str, Any],
) -> tuple[str, str]:
    """``update`` and ``condition`` that also keep ``evidence`` (a delivery id) among the
    row's deliveries seen, and hold only if it is not there yet; unchanged without one."""
    if evidence is None:
        return update, condition
    names["#seen"] = SEEN_DELIVERIES
    values[":evidence"] = _s(evidence)
    values[":evidence_set"] = _string_set(evidence)
    return (
        f"{update} ADD #seen :evidence_set",
        f"{condition} AND NOT contains(#seen, :evidence)",
    )


class Intake(Reads):
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
        if state not in lifecycle.RECORD.targets:
            *others, last = (s.value for s in lifecycle.RECORD.targets)
            raise ValueError(f"a new row starts {', '.join(others)} or {last}, not {state}")
        now = self.clock.time()
        item: dict[str, Any] = {
            PARTITION_KEY: _s(key.pk),
            "kind": _s(key.kind.value),
            "job_id": _s(key.job_id),
            "state": _s(state.value),
            PENDING_STATE: _s(state.value),
            STATE_SINCE: _n(now),
            "created_at": _n(now),
            "updated_at": _n(now),
            TTL_ATTRIBUTE: _n(int(now) + self.ttl_seconds),
            "source": _s(source),
            # Lets the writer undo its own row, and only its own (forget_unsent).
            "token": _s(uuid.uuid4().hex),
            "attempts": _n(0),
        }
        if detail:
            item["detail"] = {"M": {k: _s(v) for k, v in detail.items()}}
        if job_created_at is not None:
            item["job_created_at"] = _n(job_created_at)
        if delivery_id is not None:
            item[SEEN_DELIVERIES] = _string_set(delivery_id)
        try:
            _write(
                self._db,
                "PutItem",
                TableName=self.table_name,
                Item=item,
                ConditionExpression=_state_is(lifecycle.RECORD)[0],
                ExpressionAttributeNames={"#pk": PARTITION_KEY},
            )
        except ConditionFailedError as refused:
            return Recorded(False, _row(refused.old) if refused.old else self._must_get(key))
        return Recorded(True, _row(item))

    def forget_unsent(self, row: LedgerRow) -> bool:
        """Delete a row its writer could not enqueue, so no orphan is left; False if it moved on."""
        state_is, values = _state_is(lifecycle.FORGET_UNSENT)
        try:
            _write(
                self._db,
                "DeleteItem",
                TableName=self.table_name,
                Key={PARTITION_KEY: _s(row.key.pk)},
                ConditionExpression=_both(state_is, "#token = :token"),
                ExpressionAttributeNames={"#state": "state", "#token": "token"},
                ExpressionAttributeValues={**values, ":token": _s(row.token or "")},
            )
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
        if evidence is not None and evidence in row.seen_deliveries:
            return None
        now = self.clock.time()
        update = "SET #state = :enqueued, #pending = :enqueued, #since = :since"
        # Only waiting rows may move here, whatever snapshot a caller holds (the table's
        # from-states): a DONE row must never leave DONE this way, a leased one belongs to
        # its holder.
        guard = "#state = :old_state AND #since = :old_since"
        names = {"#pending": PENDING_STATE, "#since": STATE_SINCE}
        values: dict[str, Any] = {
            ":enqueued": _s(JobState.ENQUEUED.value),
            ":old_state": _s(row.state.value),
            ":old_since": _n(row.state_since),
            ":since": _n(now),
        }
        update, guard = _with_evidence(update, guard, evidence, names, values)
        moved = self._conditional_update(
            row.key, lifecycle.ENQUEUE, update=update, guard=guard, names=names, values=values
        )
        if not moved:
            return None
        seen = row.seen_deliveries | ({evidence} if evidence else set())
        return replace(row, state=JobState.ENQUEUED, state_since=now, seen_deliveries=seen)

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
        if evidence is not None and evidence in row.seen_deliveries:
            return None
        now = self.clock.time()
        detail = {"reopened": row.detail.get("reason", "")}
        if row.detail.get("record"):
            detail["superseded"] = row.detail["record"]
        names = {
            "#pending": PENDING_STATE,
            "#since": STATE_SINCE,
            "#detail": "detail",
            "#struck": STRUCK_BY,
            "#not_found": "not_found",
            "#releases": "releases",
            "#outcome": "outcome",
            "#finished": "finished_at",
            "#error": "last_error",
            "#failures": "failures",
            "#failing": "failing_since",
            "#reopens": REOPENS,
        }
        values: dict[str, Any] = {
            ":enqueued": _s(JobState.ENQUEUED.value),
            ":detail": {"M": {k: _s(v) for k, v in detail.items()}},
            ":zero": _n(0),
            ":dead": _s(Outcome.DEAD_LETTERED.value),
            ":old_finished": _n(row.finished_at),
            ":since": _n(now),
            ":reopens": _n(row.reopens),
            ":reopened": _n(row.reopens + 1),
        }
        update, guard = _with_evidence(
            "SET #state = :enqueued, #pending = :enqueued, #since = :since, #detail = :detail,"
            " #not_found = :zero, #releases = :zero, #reopens = :reopened"
            " REMOVE #outcome, #finished, #error, #struck, #failures, #failing",
            # The count as read: a concurrent reopen moved finished_at anyway.
            "#outcome = :dead AND #finished = :old_finished"
            " AND (attribute_not_exists(#reopens) OR #reopens = :reopens)",
            evidence,
            names,
            values,
        )
        moved = self._conditional_update(
            row.key,
            lifecycle.REOPEN,
            update=update,
            guard=guard,
            names=names,
            values=values,
        )
        if not moved:
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
            seen_deliveries=row.seen_deliveries | ({evidence} if evidence else set()),
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
        values: dict[str, Any] = {
            ":enqueued": _s(JobState.ENQUEUED.value),
            ":written": _n(written.state_since),
            ":state": _s(before.state.value),
            ":old_since": _n(before.state_since),
        }
        names = {"#since": STATE_SINCE, "#pending": PENDING_STATE}
        if before.is_done:
            # A reopen undone: the close it overturned, as it was (the row leaves the index).
            # The reopen's count too: one that sent nothing must not use up the bound (the
            # sender's retry, with a delivery id of its own, reopens it again).
            update = (
                "SET #state = :state, #since = :old_since, #outcome = :outcome,"
                " #finished = :finished, #detail = :detail,"
                " #not_found = :not_found, #releases = :releases, #reopens = :reopens"
                " REMOVE #pending"
            )
            names |= {
                "#outcome": "outcome",
                "#finished": "finished_at",
                "#detail": "detail",
                "#not_found": "not_found",
                "#releases": "releases",
                "#reopens": REOPENS,
            }
            values |= {
                ":outcome": _s((before.outcome or Outcome.DEAD_LETTERED).value),
                ":finished": _n(before.finished_at or before.state_since),
                ":detail": {"M": {k: _s(v) for k, v in before.detail.items()}},
                ":not_found": _n(before.not_found),
                ":releases": _n(before.releases),
                ":reopens": _n(before.reopens),
            }
        else:
            update = "SET #state = :state, #pending = :state, #since = :old_since"
        added = written.seen_deliveries - before.seen_deliveries
        if added:
            # Evidence that moved nothing in the end: not seen. Where one id serves every
            # retry of an event (Stripe's evt_, Standard Webhooks' msg_), the retry that this
            # write's 503 asks for must be able to move the row again.
            update += " DELETE #seen :added"
            names["#seen"] = SEEN_DELIVERIES
            values[":added"] = {"SS": sorted(added)}
        return self._conditional_update(
            before.key,
            lifecycle.UNCLAIM,
            update=update,
            guard="#since = :written",
            names=names,
            values=values,
        )

    def note_late_webhook(self, row: LedgerRow) -> bool:
        """Record that a webhook came for a job recovered without it; True the first time only.

        The reconciler's count of recovered jobs mixes webhooks that never came with webhooks
        that were only late; this mark (one write per such job, not per delivery) tells them
        apart.
        """
        return self._conditional_update(
            row.key,
            lifecycle.NOTE_LATE_WEBHOOK,
            update="SET #late = :now",
            guard="attribute_not_exists(#late)",
            names={"#late": "late_webhook_at"},
            values={},
        )

    def _conditional_update(
        self,
        key: JobKey,
        move: lifecycle.Move,
        *,
        update: str,
        guard: str,
        names: Mapping[str, str],
        values: Mapping[str, Any],
    ) -> bool:
        """``move``, if ``guard`` holds too: one conditional update that also stamps
        ``updated_at`` and the TTL; False if refused."""
        now = self.clock.time()
        expression = _stamped(update)
        state_is, state_values = _state_is(move)
        condition = _both(state_is, guard)
        try:
            _write(
                self._db,
                "UpdateItem",
                TableName=self.table_name,
                Key={PARTITION_KEY: _s(key.pk)},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=_used(
                    expression + condition,
                    {
                        "#pk": PARTITION_KEY,
                        "#state": "state",
                        "#updated": "updated_at",
                        "#ttl": TTL_ATTRIBUTE,
                        **names,
                    },
                ),
                ExpressionAttributeValues={
                    ":now": _n(now),
                    ":ttl": _n(int(now) + self.ttl_seconds),
                    **state_values,
                    **values,
                },
            )
        except ConditionFailedError:
            return False
        return True

    def _must_get(self, key: JobKey) -> LedgerRow:
        row = self.get(key)
        if row is None:  # deleted between the failed put and this read: a forgotten orphan
            raise LedgerError(f"{key.pk} vanished while being recorded")
        return row
