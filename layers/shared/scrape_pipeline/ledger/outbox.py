"""The outbox: outcomes whose event the bus has not taken yet, kept on the job rows themselves.

``Leases.finish`` writes a row's outcome and its event (``outbox_event``, with ``outbox_at``)
in one conditional write, so no outcome exists without its event waiting. ``clear_outbox``
removes the event once the bus took it, only if it is still the one emitted (a reopened and
re-settled job owes a new one). The sparse index ``outbox-by-time``, keyed on ``outbox_at``,
holds exactly the rows still owing an event: the reconciler's outbox sweep scans it, and a
scan of a sparse index reads only the items in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.attributes import OUTBOX_INDEX, Attr
from scrape_pipeline.ledger.errors import ConditionFailedError
from scrape_pipeline.ledger.expressions import (
    Projection,
    Update,
    below,
    equals,
    expressions,
    state_is,
)
from scrape_pipeline.ledger.table import LedgerTable, call


@dataclass(frozen=True)
class PendingEvent:
    """A row's event not yet emitted: the job, when its outcome was written, the event's text."""

    key: JobKey
    outbox_at: float
    event: str


class OutboxRows(LedgerTable):
    """The rows owing an event: listed from the sparse index, cleared one by one."""

    def clear_outbox(self, key: JobKey, event: str) -> bool:
        """Forget the row's pending event if it is still ``event``; False if it changed or went."""
        update = Update().remove(Attr.OUTBOX_AT, Attr.OUTBOX_EVENT)
        condition = state_is(lifecycle.CLEAR_OUTBOX) & equals(Attr.OUTBOX_EVENT, event)
        try:
            self._update(key, condition, update, self.clock.time())
        except ConditionFailedError:
            return False
        return True

    def pending_events(
        self, *, before: float, limit: int = 100, cursor: Mapping[str, Any] | None = None
    ) -> tuple[list[PendingEvent], dict[str, Any] | None]:
        """One page of the rows whose event was written before ``before`` and not emitted."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": OUTBOX_INDEX,
            "Limit": limit,
            **expressions(
                FilterExpression=below(Attr.OUTBOX_AT, before),
                ProjectionExpression=Projection((Attr.PK, Attr.OUTBOX_AT, Attr.OUTBOX_EVENT)),
            ),
        }
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        page = call(self._db, "Scan", **request)
        events = [
            PendingEvent(
                JobKey.from_pk(item[Attr.PK]["S"]),
                float(item[Attr.OUTBOX_AT]["N"]),
                item[Attr.OUTBOX_EVENT]["S"],
            )
            for item in page.get("Items", [])
            if Attr.OUTBOX_EVENT in item
        ]
        return events, page.get("LastEvaluatedKey")
