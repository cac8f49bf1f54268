"""The ledger of the function that works jobs (the processor): its leases, links and reads, and
the outbox; no intake (``full.Ledger`` adds it for the functions that bring jobs in)."""

from __future__ import annotations

from scrape_pipeline.ledger.leases import Leases
from scrape_pipeline.ledger.outbox import OutboxRows


class WorkLedger(Leases, OutboxRows):
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""
