"""Which lifecycle move a piece of evidence calls for: one pure function, ``decide``.

The receiver, the recoverer, the job-list sweep and the watch sweep each read what they need
(a row, a listing, a delivery), ask ``decide`` with what they saw, and make the write it names
(``scrape_pipeline.lifecycle`` has every move; the ledger's conditions still guard each one,
so a decision made on a row read a moment ago is safe to act on). No I/O here, and no clock:
the caller passes ``now``.

    evidence                    row                          move        why
    webhook (any)               none                         record      new (RECEIVED)
    webhook with delivery id    DONE, closed as unknown      reopen      settled after all
    webhook with delivery id    WATCHING                     enqueue     woken / announced
    webhook                     RECEIVED, ours submitted     enqueue     announced
    webhook                     RECEIVED, stale (120 s)      enqueue     stale
    webhook                     any other, recovered         note late   late (once per job)
    a sweep's or a replay's     none                         record      new (ENQUEUED)
    ... (settled, due, stuck)   DONE, closed as unknown      reopen      settled after all
    ...                         WATCHING (not sick*)         enqueue     woken
    ...                         PROCESSING, lease expired    take over   lease expired
    ...                         RECEIVED/ENQUEUED, stale     enqueue     stale (900 s)
    job list: running           none                         record      new (WATCHING)
    job list: running           DONE, closed as unknown      reopen      settled after all
    watch rows: poll due        WATCHING batch/crawl, sick   enqueue     poll due
    watch rows: any             WATCHING extract, healthy    nothing     the listing judges it

    A webhook's move carries what to do if it does not happen (the row moved since it was
    read): note the webhook late, if the row was recovered without it, or nothing.

    * a sick row (its own GET failing) is woken only by the watch sweep, on its schedule.

``tests/unit/test_decisions.py`` is the full table, one line per case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobKind, JobState, Source, source_recovers
from scrape_pipeline.lifecycle import Move

if TYPE_CHECKING:
    from scrape_pipeline.ledger import LedgerRow


class Seen(StrEnum):
    """What a piece of evidence saw of a job."""

    WEBHOOK = "webhook"  # a verified delivery: the job exists; the processor asks if it settled
    LISTED_SETTLED = "listed_settled"  # the job list shows it settled
    LISTED_RUNNING = "listed_running"  # the job list shows it queued or processing
    LOGGED = "logged"  # the API's delivery log names it (the sweep, or an operator's replay)
    STUCK = "stuck"  # the stuck-rows sweep: a waiting row gone quiet, or a lease run out
    # The watch sweep's rows pass read a parked row: its poll by age is due, or not yet.
    POLL_DUE = "poll_due"
    POLL_NOT_DUE = "poll_not_due"
    # The watch sweep wakes a parked row: its listing no longer shows it unsettled, or its
    # poll is due.
    WATCH_WAKE = "watch_wake"


@dataclass(frozen=True)
class Evidence:
    """What was seen, who saw it, and (a webhook's) the delivery id that brought it."""

    seen: Seen
    source: Source | str  # a label that is not a ``Source`` (an operator's) is kept as it came
    # A row a delivery moved once, it never moves again (the ledger keeps the id); one without
    # an id cannot be told from a replay, so it never reopens or wakes a row.
    delivery_id: str | None = None


@dataclass(frozen=True)
class Policy:
    """When a waiting row counts as stale (its message lost), side by side; each caller passes
    the bound its settings hold, and a bound it does not pass never makes a row stale."""

    # A webhook for a RECEIVED row: the row's writer (an earlier delivery) died between its put
    # and its send, which take milliseconds; the sender retries for days, so a short bound
    # costs nothing. ``ReceiverSettings.resend_after_seconds`` (RESEND_AFTER_SECONDS).
    resend_after_seconds: float = math.inf
    # A sweep or a replay, for a RECEIVED or ENQUEUED row: an ENQUEUED row's message may still
    # be in the queue (behind a backlog, or waiting out the delay the processor gave a job it
    # released), and re-sending it sooner would double a busy pipeline's work; the sweeps are
    # the last resort, not the fast path. ``RecoverySettings.stale_after_seconds``
    # (STALE_AFTER_SECONDS, through ``ReconcilerSettings``).
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
    SICK = "sick"  # parked because its own GET fails: the watch sweep polls it, on its schedule
    KNOWN = "known"  # running, with a row: its message or the watch sweep takes it from there
    BY_LISTING = "by_listing"  # a parked extract job: the listing of unsettled jobs judges it
    NOT_DUE = "not_due"  # a parked row whose poll is not due yet


@dataclass(frozen=True)
class Decision:
    """The move to make (None: nothing to do), where it leaves the row, and why.

    ``otherwise``, for a webhook's move, is the decision when that move does not happen (the
    row moved since it was read, or the ledger's guard refused): note the webhook late, or
    nothing. A recoverer has no fallback: a claim refused was someone else's to make.
    """

    move: Move | None
    state: JobState  # the row's state after the move (as it is, for nothing to do)
    why: Why
    otherwise: Decision | None = None


# What a recoverer's caller saw, by the source it names (a ``Source`` hashes as its text, so
# a stored label finds its member); any other source is a delivery-log entry or its replay.
_SEEN_BY_SOURCE: Mapping[str, Seen] = {
    Source.WATCH: Seen.WATCH_WAKE,
    Source.STUCK_ROWS: Seen.STUCK,
    Source.JOB_LIST: Seen.LISTED_SETTLED,
}


def decide(row: LedgerRow | None, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """The move ``evidence`` calls for on ``row`` (as just read; None: no row) at ``now``."""
    if row is None:
        return Decision(lifecycle.RECORD, _recorded_state(evidence.seen), Why.NEW)
    return _RULE_BY_SEEN.get(evidence.seen, _recovery)(row, evidence, now, policy)


def recovery_evidence(source: Source | str) -> Evidence:
    """The evidence a recoverer's caller brings, read from the source it names."""
    return Evidence(_SEEN_BY_SOURCE.get(source, Seen.LOGGED), source)


def _recorded_state(seen: Seen) -> JobState:
    """The state a new row starts in: a webhook's waits for its own send, a running job's is
    parked for the watch sweep, and a recovery's row is enqueued at once."""
    return _NEW_ROW_STATE.get(seen, JobState.ENQUEUED)


def _nothing(row: LedgerRow, why: Why) -> Decision:
    return Decision(None, row.state, why)


def _reopen() -> Decision:
    return Decision(lifecycle.REOPEN, JobState.ENQUEUED, Why.SETTLED_AFTER_ALL)


def _enqueue(why: Why) -> Decision:
    return Decision(lifecycle.ENQUEUE, JobState.ENQUEUED, why)


def _stale(row: LedgerRow, now: float, bound: float) -> bool:
    # Strictly older: a row exactly at the bound is still fresh (for both bounds alike).
    return row.state_since < now - bound


def _webhook(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """A webhook for a known job: wake or reopen it if it waits for this; else, when it was
    recovered without its webhook, note the webhook late (once: the mark is on the row)."""
    late = row.late_webhook_at is None and source_recovers(row.source)
    if late:
        otherwise = Decision(lifecycle.NOTE_LATE_WEBHOOK, row.state, Why.LATE_WEBHOOK)
    else:
        otherwise = _nothing(row, Why.DUPLICATE)
    moved = _webhook_moves(row, evidence, now, policy)
    return otherwise if moved is None else replace(moved, otherwise=otherwise)


def _webhook_moves(
    row: LedgerRow, evidence: Evidence, now: float, policy: Policy
) -> Decision | None:
    """The row a webhook moves on: one closed as unknown, parked WATCHING, recorded at our
    submission, or whose writer died between put and send (each moved once per delivery id,
    by the ledger's condition, of which there may be several concurrent duplicates)."""
    announced = row.source == Source.SUBMITTED
    if evidence.delivery_id is not None:
        if row.reopenable:
            return _reopen()
        if row.state is JobState.WATCHING:
            # Each wake costs a GET, so only a delivery not seen before wakes it.
            return _enqueue(Why.ANNOUNCED if announced else Why.WOKEN)
    if row.state is not JobState.RECEIVED:
        return None
    if announced:
        return _enqueue(Why.ANNOUNCED)
    return _enqueue(Why.STALE) if _stale(row, now, policy.resend_after_seconds) else None


def _listed_running(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """Listed as running: only a close as unknown or never settled is overturned by it."""
    return _reopen() if row.reopenable else _nothing(row, Why.KNOWN)


def _parked(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """The watch sweep's rows pass: batches, crawls and sick jobs are polled by age; a
    healthy extract job is judged by the listing (``Why.BY_LISTING``)."""
    sick = row.failing_since is not None
    if row.state is not JobState.WATCHING:
        return _nothing(row, Why.KNOWN)
    if row.key.kind is JobKind.EXTRACT and not sick:
        return _nothing(row, Why.BY_LISTING)
    if evidence.seen is Seen.POLL_DUE:
        return _enqueue(Why.POLL_DUE)
    return _nothing(row, Why.NOT_DUE)


def _recovery(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """Evidence that a job settled or that its row is stuck: enqueue it unless the ledger
    shows it finished or still moving (each state's rule: ``_RECOVERY_BY_STATE``)."""
    return _RECOVERY_BY_STATE.get(row.state, _recover_waiting)(row, evidence, now, policy)


def _recover_done(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    # Evidence that it settled overturns a close as "unknown" or "never settled".
    return _reopen() if row.reopenable else _nothing(row, Why.FINISHED)


def _recover_watching(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if row.failing_since is not None and evidence.seen is not Seen.WATCH_WAKE:
        # Parked because its own GET keeps failing: that it settled is known already, and
        # a list that shows it settled on every read would wake it every run.
        return _nothing(row, Why.SICK)
    return _enqueue(Why.WOKEN)


def _recover_processing(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    # The holder died; its message may be gone (redriven, or expired): send another,
    # and the processor that gets it takes the lease over.
    if row.lease_expired(now):
        return Decision(lifecycle.TAKE_OVER, JobState.PROCESSING, Why.LEASE_EXPIRED)
    return _nothing(row, Why.HELD)


def _recover_waiting(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    # RECEIVED or ENQUEUED: stuck only once it has waited past the stale bound.
    if _stale(row, now, policy.stale_after_seconds):
        return _enqueue(Why.STALE)
    return _nothing(row, Why.FRESH)


# A rule: the decision for a row, given the evidence (``decide``'s arguments but the row known).
type _Rule = Callable[[LedgerRow, Evidence, float, Policy], Decision]

# By what was seen; any other evidence says the job settled or its row is stuck (_recovery).
_NEW_ROW_STATE: Mapping[Seen, JobState] = {
    Seen.WEBHOOK: JobState.RECEIVED,
    Seen.LISTED_RUNNING: JobState.WATCHING,
}

_RULE_BY_SEEN: Mapping[Seen, _Rule] = {
    Seen.WEBHOOK: _webhook,
    Seen.LISTED_RUNNING: _listed_running,
    Seen.POLL_DUE: _parked,
    Seen.POLL_NOT_DUE: _parked,
}

# A recovery's rule by the row's state; any other (RECEIVED, ENQUEUED) is a waiting row's.
_RECOVERY_BY_STATE: Mapping[JobState, _Rule] = {
    JobState.DONE: _recover_done,
    JobState.WATCHING: _recover_watching,
    JobState.PROCESSING: _recover_processing,
}


__all__: Sequence[str] = (
    "Decision",
    "Evidence",
    "Policy",
    "Seen",
    "Why",
    "decide",
    "recovery_evidence",
)
