"""The job ledger: one DynamoDB row per job, moved only by conditional writes.

Each write is a move of ``scrape_pipeline.lifecycle.MOVES`` (verb, from-states, to-states,
guard): it takes the state part of its condition from that table and adds the guard. The way
to DONE is RECEIVED, ENQUEUED, PROCESSING, with WATCHING a wait beside it, but rows do not
only move forward: a released lease, a woken WATCHING row and a reopened close go back to
ENQUEUED; a WATCHING row may be leased directly; an expired lease is taken again; a writer
whose message was not sent undoes its row (``forget_unsent``, ``unclaim``).

"Processed" means DONE, never "a row exists". Uniqueness is the database's: a conditional
put, never a read followed by a write. Rows that are not DONE carry ``pending_state`` and
``state_since``, the keys of the sparse GSI ``pending-by-state`` that the reconciler queries
for stuck and watched rows; DONE rows drop ``pending_state`` and leave the index.

The one way out of DONE is ``reopen``: a job closed because the API did not know it or
it did not settle in time is reopened by evidence that it has settled (its webhook, the job
list, the delivery log), with a condition on the exact row that was closed (and put back to
that close by ``unclaim`` if the message it calls for cannot be sent). A job is reopened at
most ``max_reopens`` times (``reopens`` counts them), and a webhook reopens or wakes a job
only with a delivery id the row has not kept (``seen_deliveries``: the ids of the deliveries
that created, reopened or woke it), so a replayed delivery never makes work twice.

``strikes`` counts the attempts since the job last made progress that did not end cleanly.
The row keeps them as a set, ``struck_by``, of lease owners (one owner id per attempt):
``acquire`` adds the attempt's owner; a clean release (not settled, throttled, a transient
outage) or parking it WATCHING deletes it; a page checkpoint (a batch's or crawl's page
stored: progress) empties the set, so neither this attempt nor those before it count against
a job that is moving. Set operations are idempotent: an attempt is un-struck at most once
however many pages it stores, and a release after a checkpoint changes nothing. An attempt
that raised keeps its strike and its error; one that was killed (timeout, crash) keeps its
strike without one. The processor dead-letters a job whose strikes pass a bound: a job stuck
on one page (no progress) reaches it, while a big batch or crawl that needs many
invocations, some killed mid-page, never does as long as each stores something.

``failures`` counts the consecutive API calls for the job that failed in a way that is not its
fault (a 5xx, a timeout, a 404 of a job proven to exist), since ``failing_since``; any answer
of the job's state clears both. The processor parks a job whose streak reaches a bound
(``park``), and the watch sweep polls such a row on a capped schedule.

Every write sets ``expires_at`` anew: a row expires ``ttl_days`` after its last change.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from scrape_pipeline import lifecycle
from scrape_pipeline.aws_errors import (
    AWS_ERRORS,
    AWSUnavailableError,
    is_condition_failed,
    refused_item,
    unavailable,
)
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import REOPENABLE_REASONS, JobKey, JobState, Outcome

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

# Names defined once: the template's key schema, GSI and TTL attribute are these.
PARTITION_KEY = "pk"
PENDING_INDEX = "pending-by-state"
PENDING_STATE = "pending_state"
STATE_SINCE = "state_since"
TTL_ATTRIBUTE = "expires_at"
DEFAULT_TTL_DAYS = 90
# Evidence that a job closed as "unknown" or "never settled" did settle comes from its webhook,
# the job list and the delivery log; one reopen usually settles it, a second covers a reopen
# that still met the API's lag. Beyond three, the evidence is a loop (or a replayer's), and the
# dead-letter record stands for an operator to look at.
DEFAULT_MAX_REOPENS = 3
SEEN_DELIVERIES = "seen_deliveries"
REOPENS = "reopens"
# Long enough to say what failed, short enough to keep a row far below DynamoDB's 400 KB.
MAX_ERROR_CHARS = 500
# Bookkeeping rows share the table under their own key prefixes; job keys are kind#job_id.
_URL_ROW = "url#"  # per-URL resubmission counters of earlier versions (no longer written)
_META_ROW = "meta#"
_CHAIN_ROW = "chain#"
_BOOKKEEPING_PREFIXES = (_URL_ROW, _META_ROW, _CHAIN_ROW)


@dataclass(frozen=True)
class LedgerRow:
    """One job's row."""

    key: JobKey
    state: JobState
    state_since: float
    created_at: float
    source: str
    attempts: int = 0
    releases: int = 0
    outcome: Outcome | None = None
    lease_owner: str | None = None
    lease_until: float | None = None
    token: str | None = field(default=None, repr=False)
    detail: dict[str, str] = field(default_factory=dict)
    finished_at: float | None = None
    strikes: int = 0
    not_found: int = 0
    last_error: str | None = None
    # A batch's or crawl's storing progress: the next page to read, items done so far, and
    # the items of that page already done (a page too long for one invocation is split).
    next_page: int = 1
    next_item: int = 0
    items_stored: int = 0
    items_failed: int = 0
    # The longest page the last attempt to checkpoint took (seconds): the next attempt's
    # estimate of its first page, before it has timed one itself.
    page_seconds: float = 0.0
    expires_at: float | None = None
    # When the job itself was created (API time), kept for WATCHING rows: the row is younger.
    job_created_at: float | None = None
    # When the first webhook came for a job the pipeline had recovered without it.
    late_webhook_at: float | None = None
    # Consecutive failed API calls for this job (5xx, timeouts, 404s of a proven job), and
    # when the streak began: set while the job is "sick", cleared by any answer of its state.
    failures: int = 0
    failing_since: float | None = None
    # How many times the job was reopened, and the delivery ids that moved the row (evidence
    # already used: a replay of one of them moves nothing).
    reopens: int = 0
    seen_deliveries: frozenset[str] = frozenset()

    @property
    def is_done(self) -> bool:
        """The job reached its one outcome."""
        return self.state is JobState.DONE

    @property
    def reopenable(self) -> bool:
        """Closed for a reason that evidence of a settled job overturns."""
        return (
            self.state is JobState.DONE
            and self.outcome is Outcome.DEAD_LETTERED
            and self.detail.get("reason") in REOPENABLE_REASONS
        )

    def lease_expired(self, now: float) -> bool:
        """A PROCESSING row whose holder may have died."""
        return self.state is JobState.PROCESSING and (self.lease_until or 0.0) < now


@dataclass(frozen=True)
class Recorded:
    """The result of ``Ledger.record``: ``created`` is False when the job was known already."""

    created: bool
    row: LedgerRow


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


class LedgerError(PipelineError):
    """Base of the ledger's own errors (AWS failures raise ``AWSUnavailableError``)."""


class LeaseLostError(LedgerError):
    """The caller no longer holds the job's lease; ``row`` is the row as it is now."""

    def __init__(self, key: JobKey, row: LedgerRow | None) -> None:
        super().__init__(f"lease on {key.pk} is not held")
        self.key = key
        self.row = row


class ConditionFailedError(LedgerError):
    """A conditional write was refused: the row was not as the write required.

    ``old`` is the item as DynamoDB found it (None when there was none). Raised by ``_write``
    and answered inside this module: callers get False, the old row, or ``LeaseLostError``.
    """

    def __init__(self, pk: str, old: Mapping[str, Any] | None) -> None:
        super().__init__(f"the condition on {pk} did not hold")
        self.pk = pk
        self.old = old


@dataclass(frozen=True)
class RowCounts:
    """The result of ``Ledger.count_rows``: job rows by state, DONE rows by outcome."""

    by_state: dict[str, int]
    by_outcome: dict[str, int]

    @property
    def jobs(self) -> int:
        """How many job rows there are, whatever their state."""
        return sum(self.by_state.values())


@dataclass(frozen=True)
class LeaseResult:
    """The result of ``Ledger.acquire``: ``row`` is the new row when granted, else the old one."""

    granted: bool
    row: LedgerRow | None


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float) -> dict[str, str]:
    # Fixed milliseconds: DynamoDB numbers are decimal strings; repr of a float is not stable.
    return {"N": f"{value:.3f}" if isinstance(value, float) else str(value)}


# The clauses that may follow an update's SET clause.
_AFTER_SET = re.compile(r" (?=(?:REMOVE|ADD|DELETE) )")
# The set of lease owners whose attempts hold a strike (see the module docstring).
STRUCK_BY = "struck_by"


def _stamped(update: str) -> str:
    """``update`` with ``updated_at`` and the TTL set too: a row expires after its last change."""
    set_part, *rest = _AFTER_SET.split(update, maxsplit=1)
    return f"{set_part}, #updated = :now, #ttl = :ttl" + (f" {rest[0]}" if rest else "")


def _string_set(value: str) -> dict[str, list[str]]:
    """``value`` as a DynamoDB string set of one, for ADD and DELETE (``struck_by``, the
    deliveries seen)."""
    return {"SS": [value]}


def _used(expressions: str, names: Mapping[str, str]) -> dict[str, str]:
    """The ``#name`` placeholders that ``expressions`` mention."""
    return {k: v for k, v in names.items() if re.search(re.escape(k) + r"\b", expressions)}


def _state_value(state: JobState) -> str:
    """The placeholder of ``state``'s value in conditions and updates alike (``:enqueued``)."""
    return f":{state.value.lower()}"


def _state_is(move: lifecycle.Move) -> tuple[str, dict[str, Any]]:
    """The state part of ``move``'s condition, from its from-states in the lifecycle table, and
    the values it names. "No row" is ``attribute_not_exists(#pk)``; any state at all is "a row".
    """
    present = [state for state in move.sources if state is not lifecycle.ABSENT]
    clauses = ["attribute_not_exists(#pk)"] if lifecycle.ABSENT in move.sources else []
    if set(present) == set(JobState):
        return " OR ".join([*clauses, "attribute_exists(#pk)"]), {}
    if len(present) == 1:
        clauses.append(f"#state = {_state_value(present[0])}")
    elif present:
        clauses.append(f"#state IN ({', '.join(map(_state_value, present))})")
    return " OR ".join(clauses), {_state_value(state): _s(state.value) for state in present}


def _both(state_is: str, guard: str) -> str:
    """``state_is AND guard``, the state part bracketed when it is a disjunction."""
    return f"({state_is}) AND {guard}" if " OR " in state_is else f"{state_is} AND {guard}"


def _row(item: Mapping[str, Any]) -> LedgerRow:
    def s(name: str) -> str | None:
        value = item.get(name)
        return value["S"] if value and "S" in value else None

    def n(name: str) -> float | None:
        value = item.get(name)
        return float(value["N"]) if value and "N" in value else None

    outcome = s("outcome")
    detail = item.get("detail", {}).get("M", {})
    return LedgerRow(
        key=JobKey.from_pk(s(PARTITION_KEY) or ""),
        state=JobState(s("state") or JobState.RECEIVED),
        state_since=n(STATE_SINCE) or 0.0,
        created_at=n("created_at") or 0.0,
        source=s("source") or "",
        attempts=int(n("attempts") or 0),
        releases=int(n("releases") or 0),
        outcome=Outcome(outcome) if outcome else None,
        lease_owner=s("lease_owner"),
        lease_until=n("lease_until"),
        token=s("token"),
        detail={k: v.get("S", "") for k, v in detail.items()},
        finished_at=n("finished_at"),
        # Rows written before strikes were a set kept a number in ``strikes``: ignored, so such
        # a row's earlier strikes are forgotten once (a poison job gets a few more attempts).
        strikes=len(item.get(STRUCK_BY, {}).get("SS", [])),
        not_found=int(n("not_found") or 0),
        last_error=s("last_error"),
        next_page=int(n("next_page") or 1),
        next_item=int(n("next_item") or 0),
        items_stored=int(n("items_stored") or 0),
        items_failed=int(n("items_failed") or 0),
        page_seconds=n("page_seconds") or 0.0,
        expires_at=n(TTL_ATTRIBUTE),
        job_created_at=n("job_created_at"),
        late_webhook_at=n("late_webhook_at"),
        failures=int(n("failures") or 0),
        failing_since=n("failing_since"),
        reopens=int(n(REOPENS) or 0),
        seen_deliveries=frozenset(item.get(SEEN_DELIVERIES, {}).get("SS", [])),
    )


_METHODS = {"PutItem": "put_item", "UpdateItem": "update_item", "DeleteItem": "delete_item"}


def _write(db: DynamoDBClient, operation: str, **request: Any) -> dict[str, Any]:
    """The one conditional write: every PutItem, UpdateItem or DeleteItem with a condition.

        condition holds ───▶ written; DynamoDB's response comes back
        condition fails ───▶ nothing written; ConditionFailedError(the item as it was)
        AWS fails ─────────▶ AWSUnavailableError: try again later

    Uniqueness and order are the database's: the condition decides in the same call as the
    write, and a refusal carries the row that won (``ALL_OLD``), so no second read is needed.
    """
    send: Callable[..., Any] = getattr(db, _METHODS[operation])
    try:
        response = send(**request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
    except AWS_ERRORS as exc:
        if is_condition_failed(exc):
            pk = (request.get("Key") or request["Item"])[PARTITION_KEY]["S"]
            raise ConditionFailedError(pk, refused_item(exc)) from exc
        raise unavailable("dynamodb", operation, exc) from exc
    return dict(response)


class Ledger:
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        ttl_days: int = DEFAULT_TTL_DAYS,
        max_reopens: int = DEFAULT_MAX_REOPENS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if client is None:
            import boto3  # noqa: PLC0415 - only when no client is injected

            client = boto3.client("dynamodb")
        self.table_name = table_name
        self._db = client
        self.ttl_seconds = ttl_days * 86_400
        self.max_reopens = max_reopens
        self.clock = clock

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client (bookkeeping rows share the table)."""
        return self._db

    # -- receiver --------------------------------------------------------------------------

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

    # -- processor -------------------------------------------------------------------------

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

    # -- reading ---------------------------------------------------------------------------

    def get(self, key: JobKey) -> LedgerRow | None:
        """The job's row, read consistently; None when unknown."""
        try:
            response = self._db.get_item(
                TableName=self.table_name,
                Key={PARTITION_KEY: _s(key.pk)},
                ConsistentRead=True,
            )
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "GetItem", exc) from exc
        item = response.get("Item")
        return _row(item) if item else None

    def get_many(self, keys: Sequence[JobKey]) -> dict[JobKey, LedgerRow]:
        """The rows of up to 100 jobs in one read (missing jobs are absent from the result)."""
        if not keys:
            return {}
        if len(keys) > 100:
            raise ValueError("at most 100 keys per read")
        rows = [_row(item) for item in self.batch_items([k.pk for k in keys])]
        return {row.key: row for row in rows}

    def batch_items(self, pks: Sequence[str]) -> list[dict[str, Any]]:
        """The raw items of up to 100 partition keys, in one BatchGetItem (and its retries)."""
        request: dict[str, Any] = {
            self.table_name: {
                "Keys": [{PARTITION_KEY: _s(pk)} for pk in dict.fromkeys(pks)],
                "ConsistentRead": True,
            }
        }
        items: list[dict[str, Any]] = []
        for _ in range(8):  # unprocessed keys come back under load: ask for them again
            try:
                response = self._db.batch_get_item(RequestItems=request)
            except AWS_ERRORS as exc:
                raise unavailable("dynamodb", "BatchGetItem", exc) from exc
            items += response.get("Responses", {}).get(self.table_name, [])
            request = dict(response.get("UnprocessedKeys") or {})
            if not request:
                return items
        raise LedgerError("BatchGetItem kept returning unprocessed keys")

    def _must_get(self, key: JobKey) -> LedgerRow:
        row = self.get(key)
        if row is None:  # deleted between the failed put and this read: a forgotten orphan
            raise LedgerError(f"{key.pk} vanished while being recorded")
        return row

    def pending(
        self,
        state: JobState,
        *,
        since_before: float,
        since_after: float | None = None,
        limit: int = 100,
        cursor: Mapping[str, Any] | None = None,
    ) -> tuple[list[LedgerRow], dict[str, Any] | None]:
        """Rows in ``state`` (not DONE) since before ``since_before``, oldest first, one page.

        ``since_after`` (inclusive) starts the range later: a resume point that stays valid
        however the rows before it moved since.
        """
        if state is JobState.DONE:
            raise ValueError("DONE rows are not in the pending index")
        values = {":state": _s(state.value), ":before": _n(since_before)}
        condition = "#pending = :state AND #since < :before"
        if since_after is not None:
            condition = "#pending = :state AND #since BETWEEN :after AND :before"
            values[":after"] = _n(since_after)
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": PENDING_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#pending": PENDING_STATE, "#since": STATE_SINCE},
            "ExpressionAttributeValues": values,
            "Limit": limit,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = dict(cursor)
        try:
            response = self._db.query(**kwargs)
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "Query", exc) from exc
        rows = [_row(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")

    # -- the whole table: for operators and benchmarks, never the pipeline ------------------

    def job_keys(self) -> Iterator[JobKey]:
        """Every job's key (bookkeeping rows skipped), by a paginated Scan of the keys alone."""
        for item in self._scan():
            yield JobKey.from_pk(item[PARTITION_KEY]["S"])

    def count_rows(self) -> RowCounts:
        """Job rows by state and DONE rows by outcome, by a paginated Scan of three attributes."""
        by_state: Counter[str] = Counter()
        by_outcome: Counter[str] = Counter()
        for item in self._scan("state", "outcome"):
            by_state[item.get("state", {}).get("S", "?")] += 1
            if "outcome" in item:
                by_outcome[item["outcome"]["S"]] += 1
        return RowCounts(dict(sorted(by_state.items())), dict(sorted(by_outcome.items())))

    def _scan(self, *attributes: str) -> Iterator[dict[str, Any]]:
        """The job rows' items, projected to the key and ``attributes``, page by page."""
        names = {f"#a{i}": name for i, name in enumerate((PARTITION_KEY, *attributes))}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
        }
        while True:
            try:
                page = self._db.scan(**request)
            except AWS_ERRORS as exc:
                raise unavailable("dynamodb", "Scan", exc) from exc
            for item in page.get("Items", []):
                if not item[PARTITION_KEY]["S"].startswith(_BOOKKEEPING_PREFIXES):
                    yield dict(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class Bookkeeping:
    """Counters and checkpoints kept beside the job rows (never in the pending index).

    ``chain#<kind>#<job_id>`` rows say how deep in its chain of resubmissions a job is (the
    resubmission budget is per chain of failures, not per URL for life); ``meta#<name>`` rows
    hold the reconciler's watermark and checkpoints.
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def chain_depth(self, key: JobKey) -> int:
        """How many resubmissions came before ``key`` in its chain of failed attempts (0: the
        job was submitted by someone else, so a chain starts with it)."""
        ledger = self._ledger
        request: dict[str, Any] = {
            ledger.table_name: {
                "Keys": [{PARTITION_KEY: _s(f"{_CHAIN_ROW}{key.pk}")}],
                "ConsistentRead": True,
            }
        }
        # BatchGetItem, the processor's one read (its role has no GetItem), for one key.
        try:
            response = ledger.client.batch_get_item(RequestItems=request)
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "BatchGetItem", exc) from exc
        if response.get("UnprocessedKeys"):
            raise AWSUnavailableError("dynamodb", "BatchGetItem", "UnprocessedKeys")
        items = response.get("Responses", {}).get(ledger.table_name, [])
        depth = items[0].get("depth", {}) if items else {}
        return int(depth["N"]) if "N" in depth else 0

    def record_chain(self, key: JobKey, depth: int) -> bool:
        """Record that ``key`` is the ``depth``-th resubmission of its chain, unless its depth
        is recorded already (True when this call wrote it).

        The first record stands: whoever posted the job knew its chain; a later adopter of it
        (the look-up after a crash returns the newest job for the URL, maybe one deeper in the
        chain) must not shorten the chain and so lengthen it.
        """
        ledger = self._ledger
        try:
            # UpdateItem creates the row: the processor writes nothing but conditional updates.
            _write(
                ledger.client,
                "UpdateItem",
                TableName=ledger.table_name,
                Key={PARTITION_KEY: _s(f"{_CHAIN_ROW}{key.pk}")},
                UpdateExpression="SET #depth = :depth, #ttl = :ttl",
                ConditionExpression="attribute_not_exists(#depth)",
                ExpressionAttributeNames={"#depth": "depth", "#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":depth": _n(depth),
                    ":ttl": _n(int(ledger.clock.time()) + ledger.ttl_seconds),
                },
            )
        except ConditionFailedError:
            return False
        return True

    def read(self, name: str) -> dict[str, str] | None:
        """A checkpoint's fields, or None before the first write."""
        try:
            response = self._ledger.client.get_item(
                TableName=self._ledger.table_name,
                Key={PARTITION_KEY: _s(f"{_META_ROW}{name}")},
                ConsistentRead=True,
            )
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "GetItem", exc) from exc
        item = response.get("Item")
        return _fields(item) if item else None

    def read_many(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        """The fields of each checkpoint of ``names`` written so far, a hundred a read."""
        out: dict[str, dict[str, str]] = {}
        for start in range(0, len(names), 100):
            pks = [f"{_META_ROW}{name}" for name in names[start : start + 100]]
            for item in self._ledger.batch_items(pks):
                out[item[PARTITION_KEY]["S"].removeprefix(_META_ROW)] = _fields(item)
        return out

    def write(self, name: str, fields: Mapping[str, str]) -> None:
        """Replace a checkpoint's fields."""
        item: dict[str, Any] = {PARTITION_KEY: _s(f"{_META_ROW}{name}")}
        item.update({k: _s(v) for k, v in fields.items()})
        try:
            self._ledger.client.put_item(TableName=self._ledger.table_name, Item=item)
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "PutItem", exc) from exc


def _fields(item: Mapping[str, Any]) -> dict[str, str]:
    """A checkpoint item's fields as strings (its key left out)."""
    return {k: v.get("S", v.get("N", "")) for k, v in item.items() if k != PARTITION_KEY}


def new_owner_id(prefix: str = "") -> str:
    """A lease owner id unique to one processing attempt."""
    return f"{prefix}{uuid.uuid4().hex}"


__all__: Sequence[str] = (
    "DEFAULT_MAX_REOPENS",
    "DEFAULT_TTL_DAYS",
    "MAX_ERROR_CHARS",
    "PARTITION_KEY",
    "PENDING_INDEX",
    "TTL_ATTRIBUTE",
    "Bookkeeping",
    "LeaseLostError",
    "LeaseResult",
    "Ledger",
    "LedgerError",
    "LedgerRow",
    "Recorded",
    "RowCounts",
    "Streak",
    "new_owner_id",
)
