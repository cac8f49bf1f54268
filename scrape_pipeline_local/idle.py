"""Idle stretches of a simulated run, skipped whole: how far the clock may jump unchanged.

A run on a manual clock whose work is all parked (long jobs running for days) ticks the
reconciler every slot for nothing. Its outcome changes only when the simulator's answers do (a
settlement, a webhook attempt, a job's GET fault ending), a queue holds a message, Lambda
retries a run, or the watch sweep polls a parked row by its age: the clock may jump to the first
slot at or after the first of those, and the reconciler runs there instead of at every slot.
"""

from __future__ import annotations

import math
from typing import Any

from scrape_pipeline.jobs import JobState, Source
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.decide import decide
from scrape_pipeline.ledger.evidence import Evidence, Policy, Seen, Why
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings
from scrape_pipeline.reconciler.sweeps.watch_listing import (
    LISTED_CHECKPOINT,
    WATCH_CHECKPOINT,
    Listed,
    Listing,
)

_DUE = Evidence(Seen.POLL_DUE, Source.WATCH)


def listing_wakes(ledger: Any) -> bool:
    """The watch sweep's listing alone wakes a healthy extract row: none is under way across
    runs (its runs must not be skipped) and the last one was not given up (rows polled by age)."""
    books = Bookkeeping(ledger)
    if Listing.read(books.read(WATCH_CHECKPOINT) or {}) is not None:
        return False
    listed = Listed.read(books.read(LISTED_CHECKPOINT))
    return listed is None or not listed.oversize


def next_watch_poll(
    ledger: Any, settings: WatchSettings, now: float, *, by_listing: bool = False
) -> float:
    """When the watch sweep next polls a WATCHING row by its age (the sweep's own rule,
    ``WatchSettings.poll_due_at``). With ``by_listing``
    (``listing_wakes``), a row the sweep leaves to the listing (``Why.BY_LISTING``: a healthy
    extract job) has no poll: the listing shows it settled once the simulator settles it, a
    change ``LocalStack.quiet_until`` already waits for."""
    soonest, cursor = float("inf"), None
    while True:
        rows, cursor = ledger.pending(JobState.WATCHING, since_before=now + 1, cursor=cursor)
        for row in rows:
            if by_listing and decide(row, _DUE, now, Policy()).why is Why.BY_LISTING:
                continue
            soonest = min(soonest, settings.poll_due_at(row))
        if cursor is None or not rows:
            return soonest


def jump(now: float, until: float, slot: float) -> float:
    """Whole slots to skip so that the next run, at the clock's time, is the first slot's at or
    after ``until`` (0: none): the runs skipped all fall before it, when nothing is due."""
    if until - now <= slot:
        return 0.0
    return math.ceil((until - now) / slot) * slot
