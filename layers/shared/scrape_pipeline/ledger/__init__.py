"""The job ledger: one DynamoDB row per job, moved only by the conditional writes of
``lifecycle.MOVES``. The receiver runs ``Intake`` alone; the other roles (``Ledger``,
``Bookkeeping``...) load on first use (PEP 562), so its cold start does not pay for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrape_pipeline import lazy_exports
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
from scrape_pipeline.ledger.intake import Intake, Recorded, Taken
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import (
    DEFAULT_MAX_REOPENS,
    DEFAULT_TTL_DAYS,
    LeaseLostError,
    LedgerError,
)

if TYPE_CHECKING:
    from scrape_pipeline.ledger.bookkeeping import Bookkeeping as Bookkeeping
    from scrape_pipeline.ledger.full import Ledger as Ledger
    from scrape_pipeline.ledger.leases import LeaseResult as LeaseResult
    from scrape_pipeline.ledger.leases import Streak as Streak
    from scrape_pipeline.ledger.leases import new_owner_id as new_owner_id
    from scrape_pipeline.ledger.outbox import PendingEvent as PendingEvent
    from scrape_pipeline.ledger.scans import RowCounts as RowCounts

__getattr__ = lazy_exports(
    __name__,
    {
        "Bookkeeping": "bookkeeping",
        "Ledger": "full",
        "LeaseResult": "leases",
        "Streak": "leases",
        "new_owner_id": "leases",
        "PendingEvent": "outbox",
        "RowCounts": "scans",
    },
)


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
    "Intake",
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
    "Taken",
    "new_owner_id",
)
