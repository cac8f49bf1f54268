"""Evidence about a job and the decision it calls for (a move of ``lifecycle``'s, or none): the
vocabulary, and a webhook's rule (the receiver's; the sweeps' rules are ``decide``'s)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from scrape_pipeline.jobs import JobState, Source, source_recovers
from scrape_pipeline.ledger.lifecycle import (
    ENQUEUE,
    ENQUEUED,
    NOTE_LATE_WEBHOOK,
    RECEIVED,
    REOPEN,
    WATCHING,
    Move,
)

if TYPE_CHECKING:
    from scrape_pipeline.ledger.rows import LedgerRow


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


def nothing(row: LedgerRow, why: Why) -> Decision:
    """No move: the row stays as it is, for ``why``."""
    return Decision(None, row.state, why)


def reopen() -> Decision:
    """A close overturned: the row back to ENQUEUED."""
    return Decision(REOPEN, ENQUEUED, Why.SETTLED_AFTER_ALL)


def enqueue(why: Why) -> Decision:
    """A message sent for the row, for ``why``."""
    return Decision(ENQUEUE, ENQUEUED, why)


def stale(row: LedgerRow, now: float, bound: float) -> bool:
    """The row has waited longer than ``bound`` at ``now``."""
    return row.state_since < now - bound  # a row exactly at the bound is still fresh


def webhook_decision(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """Wake or reopen a row that waits for this webhook; else note it late (once) for a job
    recovered without it."""
    if row.late_webhook_at is None and source_recovers(row.source):
        otherwise = Decision(NOTE_LATE_WEBHOOK, row.state, Why.LATE_WEBHOOK)
    else:
        otherwise = nothing(row, Why.DUPLICATE)
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
        return enqueue(Why.ANNOUNCED)
    return enqueue(Why.STALE) if stale(row, now, policy.resend_after_seconds) else None


def _woken(row: LedgerRow, announced: bool) -> Decision | None:
    """A delivery with an id reopens a close as unknown, wakes a parked row (a wake costs a GET)."""
    if row.reopenable:
        return reopen()
    if row.state is WATCHING:
        return enqueue(Why.ANNOUNCED if announced else Why.WOKEN)
    return None
