"""The reconciler's lag: how long the oldest unsettled row has waited in its state.

RECEIVED, ENQUEUED and PROCESSING rows are work the pipeline owes: each should move within
minutes (a message processed, a lost one re-sent by the stuck-rows sweep after STALE_AFTER).
The oldest of them is the backlog the alarm ``OldestUnsettledAlarm`` watches. WATCHING rows
are left out on purpose: a job may run for days, and waiting for it is not lag.

The sparse ``pending-by-state`` index is ordered by ``state_since`` within a state, so one
one-row query per state finds it: three queries a run.
"""

from __future__ import annotations

from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger import Ledger

__all__ = ["OWED_STATES", "oldest_unsettled_age"]

OWED_STATES = (JobState.RECEIVED, JobState.ENQUEUED, JobState.PROCESSING)


def oldest_unsettled_age(ledger: Ledger, now: float) -> float:
    """Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has been in its state (0: none)."""
    oldest = now
    for state in OWED_STATES:
        rows, _ = ledger.pending(state, since_before=now, limit=1)
        if rows:
            oldest = min(oldest, rows[0].state_since)
    return max(0.0, now - oldest)
