"""Telling the ledger about batches and crawls at submission, so none can go unnoticed.

The API lists extract jobs but has no list of batches or crawls: if a batch's webhook is
lost, only the submitter knew it existed. Recording it at submission (``source=submitted``,
state WATCHING, nothing enqueued) closes that gap: its webhook wakes it (the receiver enqueues
it), and if none comes the reconciler's watch sweep polls it on a schedule that follows its
age (``sweeps.watch``), so a quick batch whose webhook is lost is stored minutes
after it settles, not after the stale-row sweep's quarter of an hour.

The row is the ledger's ``submitted_row``: the DynamoDB run journal puts the same one in the
transaction that records the job id (``scrape_pipeline.runs.dynamodb``).
"""

from __future__ import annotations

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.intake import Recorded


def expect(ledger: Ledger, kind: JobKind, job_id: str) -> Recorded:
    """Record a just-submitted job whose webhook the pipeline should wait for."""
    key = JobKey(kind, job_id)
    return ledger.put_new(key, ledger.submitted_row(key, ledger.clock.time()))
