"""The reconciler's lag: how long the oldest RECEIVED, ENQUEUED or PROCESSING row has waited
(WATCHING is not lag: a job may run for days); one one-row query of the pending index a state."""

from __future__ import annotations

from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.full import Ledger

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
