"""``decide``, the one decision function, as a table: a row state (or none) and a piece of
evidence in, the move out, with an injected ``now`` and the staleness edges of both bounds.

No moto, no clock: ``decide`` reads nothing but its arguments. That the receiver, the
recoverer and the sweeps make the writes it names is for their own tests (tests/receiver,
tests/pipeline, tests/property), which judge from outside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scrape_pipeline.jobs import (
    REASON_NEVER_SETTLED,
    REASON_POISON,
    REASON_UNKNOWN_JOB,
    JobKey,
    JobKind,
    JobState,
    Outcome,
    Source,
)
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.decide import decide, recovery_evidence
from scrape_pipeline.ledger.evidence import Decision, Evidence, Policy, Seen, Why
from scrape_pipeline.ledger.lifecycle import ABSENT, Move
from scrape_pipeline.ledger.rows import LedgerRow
from tests.support.ledger import allows

NOW = 1_900_000_000.0  # whole, so NOW - 120.5 and the like are exact
RESEND = 120.0  # the receiver's bound (ReceiverSettings.resend_after_seconds' default)
STALE = 900.0  # the recoverer's (RecoverySettings.stale_after_seconds' default)
BOTH = Policy(resend_after_seconds=RESEND, stale_after_seconds=STALE)
RECEIVER = Policy(resend_after_seconds=RESEND)
RECOVERER = Policy(stale_after_seconds=STALE)

R, E, P, W, D = (
    JobState.RECEIVED,
    JobState.ENQUEUED,
    JobState.PROCESSING,
    JobState.WATCHING,
    JobState.DONE,
)
RECORD, REOPEN, ENQUEUE, TAKE_OVER, LATE = (
    lifecycle.RECORD,
    lifecycle.REOPEN,
    lifecycle.ENQUEUE,
    lifecycle.TAKE_OVER,
    lifecycle.NOTE_LATE_WEBHOOK,
)

HOOK = Evidence(Seen.WEBHOOK, Source.WEBHOOK, "msg_2fX")  # with its delivery id
BARE_HOOK = Evidence(Seen.WEBHOOK, Source.WEBHOOK)  # no delivery id: like a replay
LISTED = Evidence(Seen.LISTED_SETTLED, Source.JOB_LIST)
RUNNING = Evidence(Seen.LISTED_RUNNING, Source.JOB_LIST)
LOGGED = Evidence(Seen.LOGGED, Source.DELIVERY_LOG)
STUCK = Evidence(Seen.STUCK, Source.STUCK_ROWS)
WAKE = Evidence(Seen.WATCH_WAKE, Source.WATCH)
POLL_DUE = Evidence(Seen.POLL_DUE, Source.WATCH)
NOT_DUE = Evidence(Seen.POLL_NOT_DUE, Source.WATCH)


@dataclass(frozen=True)
class Row:
    """A row as read: its state, source and age (seconds in that state at NOW)."""

    state: JobState
    source: str = Source.WEBHOOK
    age: float = 0.0
    kind: JobKind = JobKind.EXTRACT
    extra: dict[str, Any] = field(default_factory=dict)

    def build(self) -> LedgerRow:
        since = NOW - self.age
        key = JobKey(self.kind, "job-1")
        return LedgerRow(key, self.state, since, since - 5.0, self.source, **self.extra)

    def __str__(self) -> str:
        return f"{self.state.value}/{self.source}/{self.age:g}s"


def closed(reason: str, source: str = Source.JOB_LIST, **extra: Any) -> Row:
    """A row dead-lettered for ``reason`` (reopenable for "unknown job", "never settled")."""
    fields = {"outcome": Outcome.DEAD_LETTERED, "detail": {"reason": reason}}
    return Row(D, source, 60.0, extra={**fields, "finished_at": NOW - 60.0, **extra})


STORED = Row(D, extra={"outcome": Outcome.STORED, "finished_at": NOW - 60.0})
SICK = {"failing_since": NOW - 600.0, "failures": 4}
LEASED = {"lease_owner": "p-1"}


def leased(until: float, source: str = Source.WEBHOOK) -> Row:
    return Row(P, source, 30.0, extra={**LEASED, "lease_until": until})


def late(state: JobState) -> Decision:
    """A webhook's fallback for a job recovered without it: note it late (once)."""
    return Decision(LATE, state, Why.LATE_WEBHOOK)


def duplicate(state: JobState) -> Decision:
    return Decision(None, state, Why.DUPLICATE)


@dataclass(frozen=True)
class Case:
    """One line of the table: what was read and seen, and what ``decide`` must answer."""

    name: str
    row: Row | None
    evidence: Evidence
    move: Move | None
    state: JobState
    why: Why
    otherwise: Decision | None = None
    policy: Policy = BOTH


TABLE = [
    # -- a webhook (the receiver) ------------------------------------------------------------
    Case("webhook, no row", None, HOOK, RECORD, R, Why.NEW),
    Case("webhook without id, no row", None, BARE_HOOK, RECORD, R, Why.NEW),
    Case("webhook, closed unknown", closed(REASON_UNKNOWN_JOB), HOOK, REOPEN, E,
         Why.SETTLED_AFTER_ALL, late(D)),
    Case("webhook, closed never settled, its own row", closed(REASON_NEVER_SETTLED,
         Source.WEBHOOK), HOOK, REOPEN, E, Why.SETTLED_AFTER_ALL, duplicate(D)),
    Case("webhook without id, closed unknown", closed(REASON_UNKNOWN_JOB), BARE_HOOK, LATE, D,
         Why.LATE_WEBHOOK),
    Case("webhook without id, closed unknown, own row", closed(REASON_UNKNOWN_JOB,
         Source.WEBHOOK), BARE_HOOK, None, D, Why.DUPLICATE),
    Case("webhook, closed poison", closed(REASON_POISON), HOOK, LATE, D, Why.LATE_WEBHOOK),
    Case("webhook, stored", STORED, HOOK, None, D, Why.DUPLICATE),
    Case("webhook, stored, late already", Row(D, Source.JOB_LIST, extra={
         "outcome": Outcome.STORED, "late_webhook_at": NOW - 9}), HOOK, None, D, Why.DUPLICATE),
    Case("webhook, parked by the job list", Row(W, Source.WATCH), HOOK, ENQUEUE, E, Why.WOKEN,
         late(W)),
    Case("webhook, parked at submission", Row(W, Source.SUBMITTED), HOOK, ENQUEUE, E,
         Why.ANNOUNCED, duplicate(W)),
    Case("webhook without id, parked at submission", Row(W, Source.SUBMITTED), BARE_HOOK,
         None, W, Why.DUPLICATE),
    Case("webhook without id, parked by the job list", Row(W, Source.WATCH), BARE_HOOK, LATE,
         W, Why.LATE_WEBHOOK),
    Case("webhook, received at submission", Row(R, Source.SUBMITTED), BARE_HOOK, ENQUEUE, E,
         Why.ANNOUNCED, duplicate(R)),
    Case("webhook, received 119.5 s ago", Row(R, age=119.5), HOOK, None, R, Why.DUPLICATE),
    Case("webhook, received 120 s ago", Row(R, age=120.0), HOOK, None, R, Why.DUPLICATE),
    Case("webhook, received 120.5 s ago", Row(R, age=120.5), HOOK, ENQUEUE, E, Why.STALE,
         duplicate(R)),
    Case("webhook without id, received 120.5 s ago", Row(R, age=120.5), BARE_HOOK, ENQUEUE, E,
         Why.STALE, duplicate(R)),
    Case("webhook, received 120.5 s ago by a replay", Row(R, Source.ROTATION, age=120.5), HOOK,
         ENQUEUE, E, Why.STALE, late(R)),
    Case("webhook, received long ago, no bound given", Row(R, age=1e6), HOOK, None, R,
         Why.DUPLICATE, policy=RECOVERER),
    Case("webhook, enqueued long ago", Row(E, age=1e6), HOOK, None, E, Why.DUPLICATE),
    Case("webhook, enqueued by the job list", Row(E, Source.JOB_LIST), HOOK, LATE, E,
         Why.LATE_WEBHOOK),
    Case("webhook, enqueued by a replay", Row(E, Source.CLI_REPLAY), HOOK, LATE, E,
         Why.LATE_WEBHOOK),
    Case("webhook, enqueued, a label not ours", Row(E, "reconciler:job_list"), HOOK, LATE, E,
         Why.LATE_WEBHOOK),
    Case("webhook, enqueued at submission", Row(E, Source.SUBMITTED), HOOK, None, E,
         Why.DUPLICATE),
    Case("webhook, lease expired, stuck rows' row", leased(NOW - 1, Source.STUCK_ROWS), HOOK,
         LATE, P, Why.LATE_WEBHOOK),
    Case("webhook, lease expired", leased(NOW - 1), HOOK, None, P, Why.DUPLICATE),
    # -- a sweep's or a replay's evidence (the recoverer) ------------------------------------
    Case("job list settled, no row", None, LISTED, RECORD, E, Why.NEW),
    Case("delivery log, no row", None, LOGGED, RECORD, E, Why.NEW),
    Case("stuck rows, no row", None, STUCK, RECORD, E, Why.NEW),
    Case("watch wake, no row", None, WAKE, RECORD, E, Why.NEW),
    Case("job list settled, closed unknown", closed(REASON_UNKNOWN_JOB), LISTED, REOPEN, E,
         Why.SETTLED_AFTER_ALL),
    Case("delivery log, closed never settled", closed(REASON_NEVER_SETTLED), LOGGED, REOPEN,
         E, Why.SETTLED_AFTER_ALL),
    Case("job list settled, closed poison", closed(REASON_POISON), LISTED, None, D,
         Why.FINISHED),
    Case("job list settled, stored", STORED, LISTED, None, D, Why.FINISHED),
    Case("job list settled, parked", Row(W, Source.WATCH), LISTED, ENQUEUE, E, Why.WOKEN),
    Case("job list settled, parked sick", Row(W, Source.WATCH, extra=SICK), LISTED, None, W,
         Why.SICK),
    Case("stuck rows, parked sick", Row(W, extra=SICK), STUCK, None, W, Why.SICK),
    Case("watch wake, parked sick", Row(W, extra=SICK), WAKE, ENQUEUE, E, Why.WOKEN),
    Case("watch wake, parked", Row(W, Source.SUBMITTED), WAKE, ENQUEUE, E, Why.WOKEN),
    Case("stuck rows, lease expired 1 s ago", leased(NOW - 1), STUCK, TAKE_OVER, P,
         Why.LEASE_EXPIRED),
    Case("job list settled, lease expires now", leased(NOW), LISTED, None, P, Why.HELD),
    Case("job list settled, lease live", leased(NOW + 30), LISTED, None, P, Why.HELD),
    Case("job list settled, received 899.5 s ago", Row(R, age=899.5), LISTED, None, R,
         Why.FRESH),
    Case("job list settled, received 900 s ago", Row(R, age=900.0), LISTED, None, R,
         Why.FRESH),
    Case("job list settled, received 900.5 s ago", Row(R, age=900.5), LISTED, ENQUEUE, E,
         Why.STALE),
    Case("stuck rows, enqueued 899.5 s ago", Row(E, age=899.5), STUCK, None, E, Why.FRESH),
    Case("stuck rows, enqueued 900 s ago", Row(E, age=900.0), STUCK, None, E, Why.FRESH),
    Case("stuck rows, enqueued 900.5 s ago", Row(E, age=900.5), STUCK, ENQUEUE, E, Why.STALE),
    Case("delivery log, received 120.5 s ago", Row(R, age=120.5), LOGGED, None, R, Why.FRESH),
    Case("delivery log, enqueued long ago, no bound given", Row(E, age=1e6), LOGGED, None, E,
         Why.FRESH, policy=RECEIVER),
    # -- the job list shows it running -------------------------------------------------------
    Case("job list running, no row", None, RUNNING, RECORD, W, Why.NEW),
    Case("job list running, closed unknown", closed(REASON_UNKNOWN_JOB), RUNNING, REOPEN, E,
         Why.SETTLED_AFTER_ALL),
    Case("job list running, stored", STORED, RUNNING, None, D, Why.KNOWN),
    Case("job list running, parked", Row(W, Source.WATCH), RUNNING, None, W, Why.KNOWN),
    Case("job list running, enqueued long ago", Row(E, age=1e6), RUNNING, None, E, Why.KNOWN),
    # -- the watch sweep's rows pass ---------------------------------------------------------
    Case("poll due, parked extract", Row(W, Source.WATCH), POLL_DUE, None, W, Why.BY_LISTING),
    Case("poll not due, parked extract", Row(W, Source.WATCH), NOT_DUE, None, W,
         Why.BY_LISTING),
    Case("poll due, parked sick extract", Row(W, extra=SICK), POLL_DUE, ENQUEUE, E,
         Why.POLL_DUE),
    Case("poll not due, parked sick extract", Row(W, extra=SICK), NOT_DUE, None, W,
         Why.NOT_DUE),
    Case("poll due, parked batch", Row(W, Source.SUBMITTED, kind=JobKind.BATCH), POLL_DUE,
         ENQUEUE, E, Why.POLL_DUE),
    Case("poll not due, parked crawl", Row(W, Source.SUBMITTED, kind=JobKind.CRAWL), NOT_DUE,
         None, W, Why.NOT_DUE),
    Case("poll due, an enqueued batch", Row(E, kind=JobKind.BATCH), POLL_DUE, None, E,
         Why.KNOWN),
]  # fmt: skip


@pytest.mark.parametrize("case", TABLE, ids=[case.name for case in TABLE])
def test_decide_answers_the_table(case: Case) -> None:
    row = case.row.build() if case.row is not None else None
    decision = decide(row, case.evidence, NOW, case.policy)
    assert decision == Decision(case.move, case.state, case.why, case.otherwise)


@pytest.mark.parametrize("case", TABLE, ids=[case.name for case in TABLE])
def test_each_move_decided_is_one_the_lifecycle_allows(case: Case) -> None:
    row = case.row.build() if case.row is not None else None
    decision = decide(row, case.evidence, NOW, case.policy)
    before = row.state if row is not None else ABSENT
    for made in (decision, decision.otherwise):
        if made is None:
            continue
        if made.move is None:
            assert made.state is before
        else:
            assert made.move in lifecycle.MOVES
            assert allows(made.move, before, made.state)
    if decision.otherwise is not None:
        assert decision.otherwise.state is before  # the row as read: the move did not happen


def test_the_table_covers_every_move_evidence_and_reason() -> None:
    decisions = [decide(c.row.build() if c.row else None, c.evidence, NOW, c.policy) for c in TABLE]
    moves = {d.move for d in decisions} | {d.otherwise.move for d in decisions if d.otherwise}
    # The others are the writers' own: the undo of a claim, and the processor's moves.
    assert moves == {None, RECORD, REOPEN, ENQUEUE, TAKE_OVER, LATE}
    assert {c.evidence.seen for c in TABLE} == set(Seen)
    assert {d.why for d in decisions} == set(Why)


def test_a_webhook_move_not_made_falls_back_to_noting_the_webhook_late() -> None:
    row = Row(W, Source.WATCH).build()
    decision = decide(row, HOOK, NOW, BOTH)
    assert (decision.move, decision.otherwise) == (ENQUEUE, Decision(LATE, W, Why.LATE_WEBHOOK))
    own = decide(Row(W, Source.SUBMITTED).build(), HOOK, NOW, BOTH)
    assert (own.move, own.otherwise) == (ENQUEUE, Decision(None, W, Why.DUPLICATE))


@pytest.mark.parametrize(
    ("source", "seen"),
    [
        (Source.WATCH, Seen.WATCH_WAKE),
        ("watch", Seen.WATCH_WAKE),  # a stored label finds its member
        (Source.STUCK_ROWS, Seen.STUCK),
        (Source.JOB_LIST, Seen.LISTED_SETTLED),
        (Source.DELIVERY_LOG, Seen.LOGGED),
        (Source.CLI_REPLAY, Seen.LOGGED),
        (Source.ROTATION, Seen.LOGGED),
        ("reconciler", Seen.LOGGED),  # a label not ours: kept, and read as a log's entry
    ],
)
def test_recovery_evidence_is_read_from_the_source_named(source: str, seen: Seen) -> None:
    evidence = recovery_evidence(source)
    assert (evidence.seen, evidence.source, evidence.delivery_id) == (seen, source, None)


def test_the_two_bounds_apply_each_to_its_own_evidence() -> None:
    """One row 500 s in RECEIVED: stale for a webhook (120 s), fresh for a sweep (900 s)."""
    row = Row(R, age=500.0).build()
    assert decide(row, HOOK, NOW, BOTH).why is Why.STALE
    assert decide(row, LISTED, NOW, BOTH).why is Why.FRESH
    later = NOW + 400.5  # the same row, now 900.5 s old
    assert decide(row, LISTED, later, BOTH).why is Why.STALE
