"""The ledger as the tests drive it: the operator's, its moves as booleans, what a move allows."""

from __future__ import annotations

from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.lifecycle import Move, RowState
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import ConditionFailedError, call
from scrape_pipeline_ops import ledger


def allows(move: Move, before: RowState, after: RowState) -> bool:
    """``move`` may take a row in ``before`` to ``after`` (no targets: the state kept)."""
    if before not in move.sources:
        return False
    return after in move.targets if move.targets else after == before


class Ledger(ledger.Ledger):
    """``scrape_pipeline_ops.ledger.Ledger`` with the boolean forms the tests' tables use."""

    def mark_enqueued(self, row: LedgerRow) -> bool:
        """``enqueue``, saying only whether it moved."""
        return self.enqueue(row) is not None

    def reopen(self, row: LedgerRow, *, evidence: str | None = None) -> bool:
        """``reopened``, saying only whether it moved."""
        return self.reopened(row, evidence=evidence) is not None

    def link_run(self, key: JobKey, run: str) -> bool:
        """``link_run_update`` on its own: False if the job has no row."""
        try:
            call(self.client, "UpdateItem", **self.link_run_update(key, run))
        except ConditionFailedError:
            return False
        return True
