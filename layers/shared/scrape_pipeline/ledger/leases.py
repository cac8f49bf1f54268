"""The processor's writes: acquire a job's lease, then the lease holder's moves."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobKey, JobState, Outcome
from scrape_pipeline.ledger.attributes import (
    PARTITION_KEY,
    PENDING_STATE,
    STATE_SINCE,
    STRUCK_BY,
    TTL_ATTRIBUTE,
)
from scrape_pipeline.ledger.errors import ConditionFailedError, LeaseLostError
from scrape_pipeline.ledger.expressions import _both, _stamped, _state_is, _used
from scrape_pipeline.ledger.reads import Reads
from scrape_pipeline.ledger.rows import LedgerRow, _n, _row, _s, _string_set
from scrape_pipeline.ledger.table import _write

# Long enough to say what failed, short enough to keep a row far below DynamoDB's 400 KB.
MAX_ERROR_CHARS = 500


class Streak(StrEnum):
    """What one attempt's API call did to the job's run of consecutive failed calls."""

    KEEP = "keep"  # no call, or one that says nothing about the job (429, our own AWS)
    FAILED = "failed"  # a 5xx, a timeout, a 404 of a proven job: one more in the run
    ANSWERED = "answered"  # the API answered the job's state: the run is over


def _with_streak(
    update: str, remove: str, streak: Streak, names: dict[str, str]
) -> tuple[str, str]:
    """``update``'s SET and REMOVE parts with the streak counted, cleared or left alone."""
    if streak is Streak.FAILED:
        names.update({"#failures": "failures", "#failing": "failing_since"})
        update += (
            ", #failures = if_not_exists(#failures, :zero) + :one,"
            " #failing = if_not_exists(#failing, :now)"
        )
    elif streak is Streak.ANSWERED:
        names.update({"#failures": "failures", "#failing": "failing_since"})
        remove += ", #failures, #failing"
    return update, remove


@dataclass(frozen=True)
class LeaseResult:
    """The result of ``Ledger.acquire``: ``row`` is the new row when granted, else the old one."""

    granted: bool
    row: LedgerRow | None


class Leases(Reads):
    def acquire(self, key: JobKey, owner: str, lease_seconds: float, *, source: str) -> LeaseResult:
        """Take the job's PROCESSING lease: from a waiting state, an expired lease, or no row.

        ``source`` is recorded only when the row did not exist (a job known from elsewhere).
        The attempt counts a strike until it ends cleanly or stores a page (``struck_by``).
        """
        now = self.clock.time()
        names = {
            "#pk": PARTITION_KEY,
            "#state": "state",
            "#pending": PENDING_STATE,
            "#since": STATE_SINCE,
            "#updated": "updated_at",
            "#owner": "lease_owner",
            "#until": "lease_until",
            "#attempts": "attempts",
            "#struck": STRUCK_BY,
            "#kind": "kind",
            "#job": "job_id",
            "#created": "created_at",
            "#ttl": TTL_ATTRIBUTE,
            "#source": "source",
        }
        free, free_values = _state_is(lifecycle.ACQUIRE)
        taken, taken_values = _state_is(lifecycle.TAKE_OVER)
        values = {
            **free_values,
            **taken_values,
            ":processing": _s(JobState.PROCESSING.value),
            ":now": _n(now),
            ":owner": _s(owner),
            ":until": _n(now + lease_seconds),
            ":zero": _n(0),
            ":one": _n(1),
            ":kind": _s(key.kind.value),
            ":job": _s(key.job_id),
            ":ttl": _n(int(now) + self.ttl_seconds),
            ":source": _s(source),
            ":me": _string_set(owner),
        }
        try:
            response = _write(
                self._db,
                "UpdateItem",
                TableName=self.table_name,
                Key={PARTITION_KEY: _s(key.pk)},
                UpdateExpression=(
                    "SET #state = :processing, #pending = :processing, #since = :now,"
                    " #updated = :now, #owner = :owner, #until = :until,"
                    " #attempts = if_not_exists(#attempts, :zero) + :one,"
                    " #kind = if_not_exists(#kind, :kind), #job = if_not_exists(#job, :job),"
                    " #created = if_not_exists(#created, :now), #ttl = :ttl,"
                    " #source = if_not_exists(#source, :source)"
                    " ADD #struck :me"
                ),
                ConditionExpression=f"{free} OR ({taken} AND #until < :now)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ConditionFailedError as refused:
            return LeaseResult(False, _row(refused.old) if refused.old else self.get(key))
        return LeaseResult(True, _row(response["Attributes"]))

    def release(
        self,
        key: JobKey,
        owner: str,
        *,
        error: str | None = None,
        not_found: bool = False,
        streak: Streak = Streak.KEEP,
    ) -> LedgerRow:
        """Give the lease back with the job still to do.

        Clean (not settled, throttled, an outage): the attempt's strike is taken back, and a
        404 is counted apart (``not_found``). With ``error`` the strike stays and the error is
        kept: the attempt failed in a way that may repeat (a poison job), unless it stored a
        page first (a checkpoint took the strike back already). ``streak`` says what the
        attempt's API call did to the job's run of consecutive failures.
        """
        names = {
            "#pending": PENDING_STATE,
            "#since": STATE_SINCE,
            "#releases": "releases",
            "#struck": STRUCK_BY,
        }
        values: dict[str, Any] = {
            ":enqueued": _s(JobState.ENQUEUED.value),
            ":zero": _n(0),
            ":one": _n(1),
        }
        update = (
            "SET #state = :enqueued, #pending = :enqueued, #since = :now,"
            " #releases = if_not_exists(#releases, :zero) + :one"
        )
        take_back = ""
        if error is None:
            take_back = " DELETE #struck :me"
            values[":me"] = _string_set(owner)
        else:
            update += ", #error = :error"
            names["#error"] = "last_error"
            values[":error"] = _s(error[:MAX_ERROR_CHARS])
        if not_found:
            update += ", #not_found = if_not_exists(#not_found, :zero) + :one"
            names["#not_found"] = "not_found"
        update, remove = _with_streak(update, "#owner, #until", streak, names)
        return self._leased_update(
            key,
            owner,
            lifecycle.RELEASE,
            update=f"{update} REMOVE {remove}{take_back}",
            names=names,
            values=values,
        )

    def watch(self, key: JobKey, owner: str, *, job_created_at: float) -> LedgerRow:
        """Park a long-running job: WATCHING, no lease, no message (the attempt was clean)."""
        return self._leased_update(
            key,
            owner,
            lifecycle.WATCH,
            # The API answered the job's state: any run of failed calls is over.
            update=(
                "SET #state = :watching, #pending = :watching, #since = :now, #job_created = :jc"
                " REMOVE #owner, #until, #failures, #failing DELETE #struck :me"
            ),
            names={
                "#pending": PENDING_STATE,
                "#since": STATE_SINCE,
                "#struck": STRUCK_BY,
                "#job_created": "job_created_at",
                "#failures": "failures",
                "#failing": "failing_since",
            },
            values={
                ":watching": _s(JobState.WATCHING.value),
                ":me": _string_set(owner),
                ":jc": _n(float(job_created_at)),
            },
        )

    def park(self, key: JobKey, owner: str, *, not_found: bool = False) -> LedgerRow:
        """Park a job whose own API calls keep failing: WATCHING, one more failure counted.

        No message: the watch sweep polls it on a schedule that slows with the streak's age
        (``scrape_pipeline.watch``), and its webhook or the job list may wake it sooner. The
        attempt was clean: its strike is taken back (a sick API is not a poison job).
        """
        names = {"#pending": PENDING_STATE, "#since": STATE_SINCE, "#struck": STRUCK_BY}
        values = {
            ":watching": _s(JobState.WATCHING.value),
            ":zero": _n(0),
            ":one": _n(1),
            ":me": _string_set(owner),
        }
        update = "SET #state = :watching, #pending = :watching, #since = :now"
        if not_found:
            update += ", #not_found = if_not_exists(#not_found, :zero) + :one"
            names["#not_found"] = "not_found"
        update, remove = _with_streak(update, "#owner, #until", Streak.FAILED, names)
        return self._leased_update(
            key,
            owner,
            lifecycle.PARK,
            update=f"{update} REMOVE {remove} DELETE #struck :me",
            names=names,
            values=values,
        )

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
    ) -> LedgerRow:
        """Record a batch's or crawl's progress after a page (or ``next_item`` items of the
        page ``next_page``) is stored; the lease stays held.

        Progress: the job's strikes are cleared, this attempt's and earlier ones alike.
        ``page_seconds`` is the longest page the attempt took so far, for the next one.
        """
        return self._leased_update(
            key,
            owner,
            lifecycle.CHECKPOINT,
            update=(
                "SET #page = :page, #item = :item, #stored = :stored, #failed = :failed,"
                " #page_s = :page_s REMOVE #struck"
            ),
            names={
                "#page": "next_page",
                "#item": "next_item",
                "#stored": "items_stored",
                "#failed": "items_failed",
                "#page_s": "page_seconds",
                "#struck": STRUCK_BY,
            },
            values={
                ":page": _n(next_page),
                ":item": _n(next_item),
                ":stored": _n(stored),
                ":failed": _n(failed),
                ":page_s": _n(float(page_seconds)),
            },
        )

    def finish(
        self, key: JobKey, owner: str, outcome: Outcome, detail: Mapping[str, str] | None = None
    ) -> LedgerRow:
        """Mark the job DONE with its one outcome; only the lease holder may."""
        return self._leased_update(
            key,
            owner,
            lifecycle.FINISH,
            update=(
                "SET #state = :done, #outcome = :outcome, #finished = :now, #detail = :detail"
                " REMOVE #pending, #owner, #until"
            ),
            names={
                "#outcome": "outcome",
                "#finished": "finished_at",
                "#detail": "detail",
                "#pending": PENDING_STATE,
            },
            values={
                ":done": _s(JobState.DONE.value),
                ":outcome": _s(outcome.value),
                ":detail": {"M": {k: _s(v) for k, v in (detail or {}).items()}},
            },
        )

    def _leased_update(
        self,
        key: JobKey,
        owner: str,
        move: lifecycle.Move,
        *,
        update: str,
        names: Mapping[str, str],
        values: Mapping[str, Any],
    ) -> LedgerRow:
        """``move`` by the lease holder ``owner``; ``LeaseLostError`` if ``owner`` is not it."""
        now = self.clock.time()
        expression = _stamped(update)
        state_is, state_values = _state_is(move)
        condition = _both(state_is, "#owner = :owner")
        try:
            response = _write(
                self._db,
                "UpdateItem",
                TableName=self.table_name,
                Key={PARTITION_KEY: _s(key.pk)},
                UpdateExpression=expression,
                ConditionExpression=condition,
                # DynamoDB refuses names and values the expressions do not use.
                ExpressionAttributeNames=_used(
                    expression + condition,
                    {
                        "#state": "state",
                        "#owner": "lease_owner",
                        "#until": "lease_until",
                        "#updated": "updated_at",
                        "#ttl": TTL_ATTRIBUTE,
                        **names,
                    },
                ),
                ExpressionAttributeValues={
                    **state_values,
                    ":owner": _s(owner),
                    ":now": _n(now),
                    ":ttl": _n(int(now) + self.ttl_seconds),
                    **values,
                },
                ReturnValues="ALL_NEW",
            )
        except ConditionFailedError as refused:
            raise LeaseLostError(key, _row(refused.old) if refused.old else None) from refused
        return _row(response["Attributes"])


def new_owner_id(prefix: str = "") -> str:
    """A lease owner id unique to one processing attempt."""
    return f"{prefix}{uuid.uuid4().hex}"
