"""A job's lifecycle: every move of its ledger row (written under its from-states; docs/lifecycle.md
renders ``MOVES``) and which one evidence calls for (``decide``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Final

from scrape_pipeline.jobs import JobKind, JobState, Source, source_recovers

if TYPE_CHECKING:
    from scrape_pipeline.ledger.rows import LedgerRow


class Absent(Enum):
    """No row for the job (a state here, not a ``JobState``: no row can store "no row")."""

    ABSENT = "ABSENT"


ABSENT: Final = Absent.ABSENT
type RowState = JobState | Absent  # where a job's row can be, "no row" included

RECEIVED, ENQUEUED, PROCESSING, WATCHING, DONE = JobState
# Where a row waits for its message or for evidence (the sweeps find it there).
WAITING: Final = (RECEIVED, ENQUEUED, WATCHING)
_HOLDER = "the caller holds the lease"


class Verb(StrEnum):
    """A write of the ledger's, named after the ``Ledger`` method that makes it (or its short
    form: ``reopened``, ``link_run_update``)."""

    RECORD = "record"
    FORGET_UNSENT = "forget_unsent"
    ENQUEUE = "enqueue"
    REOPEN = "reopen"
    UNCLAIM = "unclaim"
    ACQUIRE = "acquire"
    CHECKPOINT = "checkpoint"
    RELEASE = "release"
    WATCH = "watch"
    PARK = "park"
    FINISH = "finish"
    NOTE_LATE_WEBHOOK = "note_late_webhook"
    CLEAR_OUTBOX = "clear_outbox"
    LINK_RUN = "link_run"
    RETELL = "retell"
    NOTE_ITEM_RETRY = "note_item_retry"
    SETTLE_ITEMS = "settle_items"
    LINK_RETRY = "link_retry"
    NOTE_RESUBMISSION = "note_resubmission"
    CARRY_RUN = "carry_run"


@dataclass(frozen=True)
class Move:
    """A write from one of ``sources`` to one of ``targets`` (none: the state kept) if ``guard``
    holds too."""

    verb: Verb
    sources: tuple[RowState, ...]
    targets: tuple[RowState, ...]
    guard: str = ""

    def allows(self, before: RowState, after: RowState) -> bool:
        """This move may take a row in ``before`` to ``after``."""
        if before not in self.sources:
            return False
        return after in self.targets if self.targets else after == before


V = Verb  # short, so that each move is one line and the table reads as a table
RECORD = Move(V.RECORD, (ABSENT,), WAITING)
FORGET_UNSENT = Move(V.FORGET_UNSENT, (RECEIVED,), (ABSENT,), "the writer's own row (its token)")
ENQUEUE = Move(
    V.ENQUEUE, WAITING, (ENQUEUED,), "unmoved since read; a webhook's delivery id not seen"
)
REOPEN = Move(
    V.REOPEN,
    (DONE,),
    (ENQUEUED,),
    "closed for a reopenable reason, as read; under max_reopens; delivery id not seen",
)
UNCLAIM = Move(V.UNCLAIM, (ENQUEUED,), (*WAITING, DONE), "as enqueue/reopen wrote it; put back")
ACQUIRE = Move(V.ACQUIRE, (ABSENT, *WAITING), (PROCESSING,))
TAKE_OVER = Move(V.ACQUIRE, (PROCESSING,), (PROCESSING,), "the lease has expired")
CHECKPOINT = Move(V.CHECKPOINT, (PROCESSING,), (), _HOLDER)
RELEASE = Move(V.RELEASE, (PROCESSING,), (ENQUEUED,), _HOLDER)
WATCH = Move(V.WATCH, (PROCESSING,), (WATCHING,), _HOLDER)
PARK = Move(V.PARK, (PROCESSING,), (WATCHING,), _HOLDER)
FINISH = Move(V.FINISH, (PROCESSING,), (DONE,), _HOLDER)
NOTE_LATE_WEBHOOK = Move(V.NOTE_LATE_WEBHOOK, tuple(JobState), (), "not marked late before")
# Any state: a row reopened before its close's event went out still owes it.
CLEAR_OUTBOX = Move(V.CLEAR_OUTBOX, tuple(JobState), (), "its pending event as emitted")
LINK_RUN = Move(V.LINK_RUN, tuple(JobState), (), "in the write of the job id to the run")
# A settled row's event owed again, naming the run linked after it was written.
RETELL = Move(V.RETELL, (DONE,), (), "its event as written, without its run")
# A batch's or crawl's items retried as extract jobs (``item_retries``).
NOTE_ITEM_RETRY = Move(V.NOTE_ITEM_RETRY, (PROCESSING,), (), _HOLDER)
SETTLE_ITEMS = Move(V.SETTLE_ITEMS, (PROCESSING,), (), _HOLDER)
LINK_NEW_RETRY = Move(V.LINK_RETRY, (ABSENT,), (WATCHING,), "a retry's job not known yet")
LINK_RETRY = Move(V.LINK_RETRY, tuple(JobState), (), "linked to no item yet")
NOTE_RESUBMISSION = Move(V.NOTE_RESUBMISSION, (PROCESSING,), (), _HOLDER)
# A run's job resubmitted: the job that carries on names the run.
CARRY_NEW_RUN = Move(V.CARRY_RUN, (ABSENT,), (WATCHING,), "a resubmission's job not known yet")
CARRY_RUN = Move(V.CARRY_RUN, tuple(JobState), (), "naming no other run; its run only is written")
MOVES: Final = tuple(move for move in list(globals().values()) if isinstance(move, Move))


class Seen(StrEnum):
    """What a piece of evidence saw of a job."""

    WEBHOOK = "webhook"  # a verified delivery: the job exists
    LISTED_SETTLED = "listed_settled"  # the job list shows it settled
    LISTED_RUNNING = "listed_running"  # the job list shows it queued or processing
    LOGGED = "logged"  # the API's delivery log names it (the sweep, or an operator's replay)
    STUCK = "stuck"  # the stuck-rows sweep: a waiting row gone quiet, or a lease run out
    POLL_DUE = "poll_due"  # the watch sweep read a parked row: its poll by age is due
    POLL_NOT_DUE = "poll_not_due"  # ... or not yet
    WATCH_WAKE = "watch_wake"  # the watch sweep wakes a parked row


@dataclass(frozen=True)
class Evidence:
    """What was seen, who saw it, and (a webhook's) the delivery id that brought it."""

    seen: Seen
    source: Source | str  # an operator's label is kept as it came
    # Moves a row once; a delivery without one never reopens or wakes.
    delivery_id: str | None = None


@dataclass(frozen=True)
class Policy:
    """When a waiting row counts as stale (its message lost); a bound not passed never does."""

    resend_after_seconds: float = math.inf  # a webhook's, for a RECEIVED row
    stale_after_seconds: float = math.inf


class Why(StrEnum):
    """Why a decision is what it is (the receiver's answer is read from it)."""

    NEW = "new"  # no row: record one
    SETTLED_AFTER_ALL = "settled_after_all"  # closed as unknown or never settled; it exists
    ANNOUNCED = "announced"  # recorded by our submitter, waiting for this first webhook
    WOKEN = "woken"  # parked while it ran; the evidence says it may have settled
    STALE = "stale"  # waiting longer than the policy's bound: its message is lost
    LEASE_EXPIRED = "lease_expired"  # its holder died: a message lets the next one take over
    POLL_DUE = "poll_due"  # a parked batch, crawl or sick job due its poll by age
    LATE_WEBHOOK = "late_webhook"  # recovered without its webhook, which came after all
    # Nothing to do:
    DUPLICATE = "duplicate"  # a webhook for a job already on its way
    FRESH = "fresh"  # waiting less than the bound: its message is on the way
    HELD = "held"  # a live lease: its holder finishes the job
    FINISHED = "finished"  # done for a reason no evidence overturns
    SICK = "sick"  # parked because its own GET fails: the watch sweep polls it
    KNOWN = "known"  # running, with a row: its message or the watch sweep takes it from there
    BY_LISTING = "by_listing"  # a parked extract job: the listing of unsettled jobs judges it
    NOT_DUE = "not_due"  # a parked row whose poll is not due yet


@dataclass(frozen=True)
class Decision:
    """The move to make (None: nothing), the state after it, and why; ``otherwise``: a webhook's
    decision if the move does not happen."""

    move: Move | None
    state: JobState
    why: Why
    otherwise: Decision | None = None


def decide(row: LedgerRow | None, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """The move ``evidence`` calls for on ``row`` (as just read; None: no row) at ``now``."""
    if row is None:
        return Decision(RECORD, _NEW_ROW_STATE.get(evidence.seen, ENQUEUED), Why.NEW)
    return _RULE_BY_SEEN.get(evidence.seen, _recovery)(row, evidence, now, policy)


def recovery_evidence(source: Source | str) -> Evidence:
    """The evidence a recoverer's caller brings, read from the source it names."""
    return Evidence(_SEEN_BY_SOURCE.get(source, Seen.LOGGED), source)


def _nothing(row: LedgerRow, why: Why) -> Decision:
    return Decision(None, row.state, why)


def _reopen() -> Decision:
    return Decision(REOPEN, ENQUEUED, Why.SETTLED_AFTER_ALL)


def _enqueue(why: Why) -> Decision:
    return Decision(ENQUEUE, ENQUEUED, why)


def _stale(row: LedgerRow, now: float, bound: float) -> bool:
    return row.state_since < now - bound  # a row exactly at the bound is still fresh


def _webhook(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """Wake or reopen a row that waits for this webhook; else note it late (once) for a job
    recovered without it."""
    if row.late_webhook_at is None and source_recovers(row.source):
        otherwise = Decision(NOTE_LATE_WEBHOOK, row.state, Why.LATE_WEBHOOK)
    else:
        otherwise = _nothing(row, Why.DUPLICATE)
    moved = _webhook_moves(row, evidence, now, policy)
    return otherwise if moved is None else replace(moved, otherwise=otherwise)


def _webhook_moves(
    row: LedgerRow, evidence: Evidence, now: float, policy: Policy
) -> Decision | None:
    announced = row.source == Source.SUBMITTED
    if evidence.delivery_id is not None and (woken := _woken(row, announced)):
        return woken
    return _received(row, announced, now, policy) if row.state is RECEIVED else None


def _received(row: LedgerRow, announced: bool, now: float, policy: Policy) -> Decision | None:
    """Announced by our submitter, or its writer died between put and send."""
    if announced:
        return _enqueue(Why.ANNOUNCED)
    return _enqueue(Why.STALE) if _stale(row, now, policy.resend_after_seconds) else None


def _woken(row: LedgerRow, announced: bool) -> Decision | None:
    """A delivery with an id reopens a close as unknown, wakes a parked row (a wake costs a GET)."""
    if row.reopenable:
        return _reopen()
    if row.state is WATCHING:
        return _enqueue(Why.ANNOUNCED if announced else Why.WOKEN)
    return None


def _listed_running(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    return _reopen() if row.reopenable else _nothing(row, Why.KNOWN)


def _parked(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """Batches, crawls and sick jobs are polled by age; a healthy extract job by the listing."""
    if row.state is not WATCHING:
        return _nothing(row, Why.KNOWN)
    if _healthy_extract(row):
        return _nothing(row, Why.BY_LISTING)
    return _enqueue(Why.POLL_DUE) if evidence.seen is Seen.POLL_DUE else _nothing(row, Why.NOT_DUE)


def _healthy_extract(row: LedgerRow) -> bool:
    return row.key.kind is JobKind.EXTRACT and row.failing_since is None


def _recovery(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    return _RECOVERY_BY_STATE.get(row.state, _recover_waiting)(row, evidence, now, policy)


def _recover_done(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    return _reopen() if row.reopenable else _nothing(row, Why.FINISHED)


def _recover_watching(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if row.failing_since is not None and evidence.seen is not Seen.WATCH_WAKE:
        # Its own GET keeps failing: a list that shows it settled would wake it every run.
        return _nothing(row, Why.SICK)
    return _enqueue(Why.WOKEN)


def _recover_processing(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if row.lease_expired(now):
        return Decision(TAKE_OVER, PROCESSING, Why.LEASE_EXPIRED)
    return _nothing(row, Why.HELD)


def _recover_waiting(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if _stale(row, now, policy.stale_after_seconds):
        return _enqueue(Why.STALE)
    return _nothing(row, Why.FRESH)


type _Rule = Callable[[LedgerRow, Evidence, float, Policy], Decision]

# A new row's state (else ENQUEUED).
_NEW_ROW_STATE: Mapping[Seen, JobState] = {Seen.WEBHOOK: RECEIVED, Seen.LISTED_RUNNING: WATCHING}
_RULE_BY_SEEN: Mapping[Seen, _Rule] = {
    Seen.WEBHOOK: _webhook,
    Seen.LISTED_RUNNING: _listed_running,
    Seen.POLL_DUE: _parked,
    Seen.POLL_NOT_DUE: _parked,
}
_RECOVERY_BY_STATE: Mapping[JobState, _Rule] = {
    DONE: _recover_done,
    WATCHING: _recover_watching,
    PROCESSING: _recover_processing,
}
# What a recoverer's caller saw, by the source it names (else a delivery-log entry).
_SEEN_BY_SOURCE: Mapping[str, Seen] = {
    Source.WATCH: Seen.WATCH_WAKE,
    Source.STUCK_ROWS: Seen.STUCK,
    Source.JOB_LIST: Seen.LISTED_SETTLED,
}
