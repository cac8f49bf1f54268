"""The whole ledger: every role in one class, for the functions that run more than intake."""

from __future__ import annotations

from scrape_pipeline.ledger.leases import Leases
from scrape_pipeline.ledger.links import Links
from scrape_pipeline.ledger.outbox import OutboxRows
from scrape_pipeline.ledger.reads import Reads


class Ledger(Links, Leases, Reads, OutboxRows):
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""
