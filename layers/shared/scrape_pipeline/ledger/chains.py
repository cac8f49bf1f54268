"""Chains of work: the job that carries on a job's work, as the ledger notes it (one
BatchGetItem a hundred jobs a link)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger.rows import LedgerRow

# How far a chain is followed in one pass (resubmissions are bounded far below this).
MAX_CHAIN: Final = 16


class RowReader(Protocol):
    """The ledger's batched read (``Ledger.get_many``)."""

    def get_many(self, keys: Iterable[JobKey]) -> dict[JobKey, LedgerRow]: ...


def successor(row: LedgerRow) -> str | None:
    """The extract job that carries ``row``'s work on (closed so, or noted by a holder that
    died); None for a job that ended or runs on itself."""
    job_id = row.detail.get(DETAIL_RESUBMITTED_AS)
    if job_id and (not row.is_done or row.outcome is Outcome.RESUBMITTED):
        return job_id
    return None


@dataclass(frozen=True)
class Chain:
    """The rows of one chain read so far, first to last, and whether its last ended it."""

    rows: tuple[LedgerRow, ...]
    ended: bool

    @property
    def final(self) -> LedgerRow | None:
        """The job that ended the chain (None while it goes on)."""
        return self.rows[-1] if self.ended else None

    @property
    def job_ids(self) -> tuple[str, ...]:
        """The chain's jobs read so far, first to last."""
        return tuple(row.key.job_id for row in self.rows)


def follow[T](ledger: RowReader, starts: Mapping[T, JobKey]) -> dict[T, Chain]:
    """Each start's chain, as far as the ledger goes (every chain's next link in one read)."""
    rows: defaultdict[T, list[LedgerRow]] = defaultdict(list)
    ended: set[T] = set()
    current = dict(starts)
    for _ in range(MAX_CHAIN):  # an empty read once every chain ended: no call
        read = ledger.get_many(current.values())
        following: dict[T, JobKey] = {}
        for name, key in current.items():
            row = read.get(key)
            if row is None:
                continue  # not known yet: the chain goes on
            rows[name].append(row)
            job_id = successor(row)
            if job_id is not None:
                following[name] = JobKey(JobKind.EXTRACT, job_id)  # resubmissions are extracts
            elif row.is_done:
                ended.add(name)
        current = following
    return {name: Chain(tuple(rows[name]), name in ended) for name in starts}
