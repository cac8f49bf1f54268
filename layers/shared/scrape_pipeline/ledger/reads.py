"""Reading rows: one, a hundred, or a page of those waiting in one state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger.attributes import PENDING_INDEX, Attr
from scrape_pipeline.ledger.errors import LedgerError
from scrape_pipeline.ledger.expressions import below, between, equals, expressions
from scrape_pipeline.ledger.rows import LedgerRow, encode, from_item
from scrape_pipeline.ledger.table import LedgerTable, call


class Reads(LedgerTable):
    """Rows read by key (consistently) or by the pending index."""

    def get(self, key: JobKey) -> LedgerRow | None:
        """The job's row, read consistently; None when unknown."""
        response = call(
            self._db,
            "GetItem",
            TableName=self.table_name,
            Key={Attr.PK.value: encode(key.pk)},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return from_item(item) if item else None

    def get_many(self, keys: Sequence[JobKey]) -> dict[JobKey, LedgerRow]:
        """The rows of up to 100 jobs in one read (missing jobs are absent from the result)."""
        if not keys:
            return {}
        if len(keys) > 100:
            raise ValueError("at most 100 keys per read")
        items = self.batch_items([k.pk for k in keys])
        return {row.key: row for row in map(from_item, items)}

    def batch_items(self, pks: Sequence[str]) -> list[dict[str, Any]]:
        """The raw items of up to 100 partition keys, in one BatchGetItem (and its retries)."""
        request: dict[str, Any] = {
            self.table_name: {
                "Keys": [{Attr.PK.value: encode(pk)} for pk in dict.fromkeys(pks)],
                "ConsistentRead": True,
            }
        }
        items: list[dict[str, Any]] = []
        for _ in range(8):  # unprocessed keys come back under load: ask for them again
            response = call(self._db, "BatchGetItem", RequestItems=request)
            items += response.get("Responses", {}).get(self.table_name, [])
            request = dict(response.get("UnprocessedKeys") or {})
            if not request:
                return items
        raise LedgerError("BatchGetItem kept returning unprocessed keys")

    def pending(
        self,
        state: JobState,
        *,
        since_before: float,
        since_after: float | None = None,
        limit: int = 100,
        cursor: Mapping[str, Any] | None = None,
    ) -> tuple[list[LedgerRow], dict[str, Any] | None]:
        """Rows in ``state`` (not DONE) since before ``since_before``, oldest first, one page.

        ``since_after`` (inclusive) starts the range later: a resume point that stays valid
        however the rows before it moved since.
        """
        if state is JobState.DONE:
            raise ValueError("DONE rows are not in the pending index")
        since = (
            below(Attr.STATE_SINCE, since_before)
            if since_after is None
            else between(Attr.STATE_SINCE, since_after, since_before)
        )
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": PENDING_INDEX,
            **expressions(KeyConditionExpression=equals(Attr.PENDING_STATE, state) & since),
            "Limit": limit,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = dict(cursor)
        response = call(self._db, "Query", **kwargs)
        rows = [from_item(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")
