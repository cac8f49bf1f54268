"""Which move a piece of evidence calls for (``decide``): a webhook's rule (``evidence``'s) and
the sweeps' rules, for a row in any state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from scrape_pipeline.jobs import JobKind, JobState, Source
from scrape_pipeline.ledger.evidence import (
    Decision,
    Evidence,
    Policy,
    Seen,
    Why,
    enqueue,
    nothing,
    reopen,
    stale,
    webhook_decision,
)
from scrape_pipeline.ledger.lifecycle import (
    DONE,
    ENQUEUED,
    PROCESSING,
    RECEIVED,
    RECORD,
    TAKE_OVER,
    WATCHING,
)

if TYPE_CHECKING:
    from scrape_pipeline.ledger.rows import LedgerRow


def decide(row: LedgerRow | None, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """The move ``evidence`` calls for on ``row`` (as just read; None: no row) at ``now``."""
    if row is None:
        return Decision(RECORD, _NEW_ROW_STATE.get(evidence.seen, ENQUEUED), Why.NEW)
    return _RULE_BY_SEEN.get(evidence.seen, _recovery)(row, evidence, now, policy)


def recovery_evidence(source: Source | str) -> Evidence:
    """The evidence a recoverer's caller brings, read from the source it names."""
    return Evidence(_SEEN_BY_SOURCE.get(source, Seen.LOGGED), source)


def _listed_running(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    return reopen() if row.reopenable else nothing(row, Why.KNOWN)


def _parked(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    """Batches, crawls and sick jobs are polled by age; a healthy extract job by the listing."""
    if row.state is not WATCHING:
        return nothing(row, Why.KNOWN)
    if _healthy_extract(row):
        return nothing(row, Why.BY_LISTING)
    return enqueue(Why.POLL_DUE) if evidence.seen is Seen.POLL_DUE else nothing(row, Why.NOT_DUE)


def _healthy_extract(row: LedgerRow) -> bool:
    return row.key.kind is JobKind.EXTRACT and row.failing_since is None


def _recovery(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    return _RECOVERY_BY_STATE.get(row.state, _recover_waiting)(row, evidence, now, policy)


def _recover_done(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    return reopen() if row.reopenable else nothing(row, Why.FINISHED)


def _recover_watching(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if row.failing_since is not None and evidence.seen is not Seen.WATCH_WAKE:
        # Its own GET keeps failing: a list that shows it settled would wake it every run.
        return nothing(row, Why.SICK)
    return enqueue(Why.WOKEN)


def _recover_processing(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if row.lease_expired(now):
        return Decision(TAKE_OVER, PROCESSING, Why.LEASE_EXPIRED)
    return nothing(row, Why.HELD)


def _recover_waiting(row: LedgerRow, evidence: Evidence, now: float, policy: Policy) -> Decision:
    if stale(row, now, policy.stale_after_seconds):
        return enqueue(Why.STALE)
    return nothing(row, Why.FRESH)


type _Rule = Callable[[LedgerRow, Evidence, float, Policy], Decision]

# A new row's state (else ENQUEUED).
_NEW_ROW_STATE: Mapping[Seen, JobState] = {Seen.WEBHOOK: RECEIVED, Seen.LISTED_RUNNING: WATCHING}
_RULE_BY_SEEN: Mapping[Seen, _Rule] = {
    Seen.WEBHOOK: webhook_decision,
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
