"""The outbox: outcomes whose event the bus has not taken, on the job rows (``finish`` writes
both); ``outbox_at`` keys the sparse index ``outbox-by-time`` until ``clear_outbox``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import OUTBOX_INDEX, Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Field, Update, expressions
from scrape_pipeline.ledger.table import LedgerTable, call


@dataclass(frozen=True)
class PendingEvent:
    """A row's event not yet emitted, and when its outcome was written."""

    key: JobKey
    outbox_at: float
    event: str


class OutboxRows(LedgerTable):
    """The rows owing an event: listed from the sparse index, cleared one by one."""

    def clear_outbox(self, key: JobKey, event: str) -> bool:
        """Forget the row's pending event if it is still ``event``; False if it changed or went."""
        # The event stays on the row (out of the index): a run linked later retells it.
        update = Update().remove(Attr.OUTBOX_AT)
        guard = Field(Attr.OUTBOX_EVENT).eq(event) & Field(Attr.OUTBOX_AT).exists()
        now = self.clock.time()
        return self._moved(key, lifecycle.CLEAR_OUTBOX, update, guard, now) is not None

    def retell(self, key: JobKey, event: str, told: str) -> bool:
        """Owe a settled row's event again as ``told`` (naming its run) if the row still holds
        ``event``; False if it changed."""
        now = self.clock.time()
        update = Update().set(Attr.OUTBOX_EVENT, told).set(Attr.OUTBOX_AT, now)
        guard = Field(Attr.OUTBOX_EVENT).eq(event)
        return self._moved(key, lifecycle.RETELL, update, guard, now) is not None

    def pending_events(
        self, *, before: float, limit: int = 100, cursor: Mapping[str, Any] | None = None
    ) -> tuple[list[PendingEvent], dict[str, Any] | None]:
        """One page of the rows whose event was written before ``before`` and not emitted."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": OUTBOX_INDEX,
            "Limit": limit,
            **expressions(
                FilterExpression=Field(Attr.OUTBOX_AT).lt(before),
                ProjectionExpression=(Attr.PK, Attr.OUTBOX_AT, Attr.OUTBOX_EVENT),
            ),
        }
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        page = call(self.client, "Scan", **request)
        events = [
            PendingEvent(
                JobKey.from_pk(item[Attr.PK]["S"]),
                float(item[Attr.OUTBOX_AT]["N"]),
                item[Attr.OUTBOX_EVENT]["S"],
            )
            for item in page.get("Items", [])
            # A job's event (a run's head owes its Run Completed here too: the run sweep's).
            if Attr.OUTBOX_EVENT in item and not item[Attr.PK]["S"].startswith(RowPrefix.RUN)
        ]
        return events, page.get("LastEvaluatedKey")
