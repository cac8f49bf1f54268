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
for stuck and watched rows; DONE rows drop ``pending_state`` and leave the index. Every write
sets ``expires_at`` anew: a row expires ``ttl_days`` after its last change.

The package, by role (``Ledger`` is the union of the roles; this module its public face):

    attributes    every attribute name, once (``Attr``), the index, the key prefixes
    rows          ``LedgerRow`` and its marshalling to and from items
    expressions   conditions and updates built from names and values; ``state_is(move)``
    table         the table's client and settings, and the one way a request is sent
    intake        record, forget_unsent, enqueue, reopen, unclaim, note_late_webhook
    leases        acquire, then the lease holder's release, watch, park, checkpoint, finish
    reads         one row, a hundred, a page of the pending index
    scans         the whole table, for operators and benchmarks
    outbox        the events of outcomes not yet emitted: listed, cleared
    bookkeeping   resubmission chains and the reconciler's checkpoints, beside the job rows
"""

from __future__ import annotations

from collections.abc import Sequence

from scrape_pipeline.ledger.attributes import (
    OUTBOX_AT,
    OUTBOX_EVENT,
    OUTBOX_INDEX,
    PARTITION_KEY,
    PENDING_INDEX,
    STATE_SINCE,
    TTL_ATTRIBUTE,
    RowPrefix,
)
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.errors import LeaseLostError, LedgerError
from scrape_pipeline.ledger.intake import Intake, Recorded
from scrape_pipeline.ledger.leases import LeaseResult, Leases, Streak, new_owner_id
from scrape_pipeline.ledger.outbox import OutboxRows, PendingEvent
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.scans import RowCounts, Scans
from scrape_pipeline.ledger.table import DEFAULT_MAX_REOPENS, DEFAULT_TTL_DAYS


class Ledger(Intake, Leases, Scans, OutboxRows):
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""


__all__: Sequence[str] = (
    "DEFAULT_MAX_REOPENS",
    "DEFAULT_TTL_DAYS",
    "OUTBOX_AT",
    "OUTBOX_EVENT",
    "OUTBOX_INDEX",
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
    "PendingEvent",
    "Recorded",
    "RowCounts",
    "RowPrefix",
    "Streak",
    "new_owner_id",
)
