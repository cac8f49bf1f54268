"""Telling the ledger about batches and crawls at submission, so none can go unnoticed.

The API lists extract jobs but has no list of batches or crawls: if a batch's webhook is
lost, only the submitter knew it existed. Recording it at submission (``source=submitted``,
state RECEIVED, nothing enqueued) closes that gap: its first webhook is treated as new
(the receiver enqueues it), and if none ever comes the stale-row sweep enqueues it.
"""

from __future__ import annotations

from scrape_pipeline.ledger import JobKey, JobKind, Ledger, Recorded

SOURCE_SUBMITTED = "submitted"


def expect(ledger: Ledger, kind: JobKind, job_id: str) -> Recorded:
    """Record a just-submitted job whose webhook the pipeline should wait for."""
    return ledger.record(JobKey(kind, job_id), source=SOURCE_SUBMITTED)
