"""Idle stretches of a simulated run, skipped whole: how far the clock may jump unchanged.

A run on a manual clock whose work is all parked (long jobs running for days) ticks the
reconciler every slot for nothing. Its outcome changes only when the simulator's answers do (a
settlement, a webhook attempt, a job's GET fault ending), a queue holds a message, Lambda
retries a run, or the watch sweep polls a parked row by its age: the clock may jump to the last
slot before the first of those, and the reconciler runs once there instead of at every slot.
"""

from __future__ import annotations

from typing import Any

from scrape_pipeline.jobs import JobState
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings


def next_watch_poll(ledger: Any, settings: WatchSettings, now: float) -> float:
    """When the watch sweep next polls a WATCHING row by its age (``WatchSweep._due`` solved
    for the time: due once parked ``min(poll, max(first_poll, age / 2))``)."""
    soonest, cursor = float("inf"), None
    while True:
        rows, cursor = ledger.pending(JobState.WATCHING, since_before=now + 1, cursor=cursor)
        for row in rows:
            since = row.state_since
            born = row.failing_since or row.job_created_at or row.created_at
            wait = min(settings.poll_seconds, max(settings.first_poll_seconds, since - born))
            soonest = min(soonest, since + wait)
        if cursor is None or not rows:
            return soonest


def jump(now: float, until: float, slot: float) -> float:
    """Whole slots to skip so the clock lands on the last slot before ``until`` (0: none)."""
    slots = int((until - now) // slot) - 1
    return max(0, slots) * slot
