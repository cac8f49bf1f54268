"""Chains of work: the job that carries on a job's work, as the ledger notes it.

A failed extract job resubmitted names its successor in its row's detail (``resubmitted_as``),
noted before the close that says so; a batch's or crawl's item retried as an extract job is
named on the batch's row (``retrying_items``) until its chain settles. The batch's holder
(``item_retries``) and ``audit --run`` follow these links; neither takes the ledger's word for
how a chain ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger.rows import LedgerRow

# How far a chain of resubmissions is followed in one pass (the budget bounds it anyway).
MAX_CHAIN: Final = 16
_READ_MAX: Final = 100  # keys per BatchGetItem


class RowReader(Protocol):
    """The ledger's batched read (``Ledger.get_many``)."""

    def get_many(self, keys: Sequence[JobKey]) -> dict[JobKey, LedgerRow]: ...


def successor(row: LedgerRow) -> str | None:
    """The extract job that carries ``row``'s work on: resubmitted, closed so or only noted
    (its holder died before the close); None for a job that ended or runs on itself."""
    job_id = row.detail.get(DETAIL_RESUBMITTED_AS)
    if job_id and (not row.is_done or row.outcome is Outcome.RESUBMITTED):
        return job_id
    return None


def rows_of(ledger: RowReader, keys: Iterable[JobKey]) -> dict[JobKey, LedgerRow]:
    """The rows of ``keys`` (those the ledger has), a hundred keys a BatchGetItem."""
    wanted = list(dict.fromkeys(keys))
    rows: dict[JobKey, LedgerRow] = {}
    for start in range(0, len(wanted), _READ_MAX):
        rows.update(ledger.get_many(wanted[start : start + _READ_MAX]))
    return rows


def successors(ledger: RowReader, job_ids: Iterable[str]) -> dict[str, str]:
    """Each extract job of ``job_ids`` that the ledger says was resubmitted: its successor."""
    rows = rows_of(ledger, (JobKey(JobKind.EXTRACT, job_id) for job_id in job_ids))
    found = {key.job_id: successor(row) for key, row in rows.items()}
    return {job_id: following for job_id, following in found.items() if following}
