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

from collections.abc import Sequence

from scrape_pipeline.ledger.attributes import (
    PARTITION_KEY,
    PENDING_INDEX,
    STATE_SINCE,
    TTL_ATTRIBUTE,
)
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.errors import LeaseLostError, LedgerError
from scrape_pipeline.ledger.intake import Intake, Recorded
from scrape_pipeline.ledger.leases import MAX_ERROR_CHARS, LeaseResult, Leases, Streak, new_owner_id
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.scans import RowCounts, Scans
from scrape_pipeline.ledger.table import DEFAULT_MAX_REOPENS, DEFAULT_TTL_DAYS


class Ledger(Intake, Leases, Scans):
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""


__all__: Sequence[str] = (
    "DEFAULT_MAX_REOPENS",
    "DEFAULT_TTL_DAYS",
    "MAX_ERROR_CHARS",
    "PARTITION_KEY",
    "PENDING_INDEX",
    "STATE_SINCE",
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
