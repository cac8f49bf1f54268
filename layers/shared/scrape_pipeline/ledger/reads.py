"""Reading rows: one, a hundred, or a page of those waiting in one state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scrape_pipeline.aws_errors import AWS_ERRORS, unavailable
from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger.attributes import (
    PARTITION_KEY,
    PENDING_INDEX,
    PENDING_STATE,
    STATE_SINCE,
)
from scrape_pipeline.ledger.errors import LedgerError
from scrape_pipeline.ledger.rows import LedgerRow, _n, _row, _s
from scrape_pipeline.ledger.table import LedgerTable


class Reads(LedgerTable):
    def get(self, key: JobKey) -> LedgerRow | None:
        """The job's row, read consistently; None when unknown."""
        try:
            response = self._db.get_item(
                TableName=self.table_name,
                Key={PARTITION_KEY: _s(key.pk)},
                ConsistentRead=True,
            )
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "GetItem", exc) from exc
        item = response.get("Item")
        return _row(item) if item else None

    def get_many(self, keys: Sequence[JobKey]) -> dict[JobKey, LedgerRow]:
        """The rows of up to 100 jobs in one read (missing jobs are absent from the result)."""
        if not keys:
            return {}
        if len(keys) > 100:
            raise ValueError("at most 100 keys per read")
        rows = [_row(item) for item in self.batch_items([k.pk for k in keys])]
        return {row.key: row for row in rows}

    def batch_items(self, pks: Sequence[str]) -> list[dict[str, Any]]:
        """The raw items of up to 100 partition keys, in one BatchGetItem (and its retries)."""
        request: dict[str, Any] = {
            self.table_name: {
                "Keys": [{PARTITION_KEY: _s(pk)} for pk in dict.fromkeys(pks)],
                "ConsistentRead": True,
            }
        }
        items: list[dict[str, Any]] = []
        for _ in range(8):  # unprocessed keys come back under load: ask for them again
            try:
                response = self._db.batch_get_item(RequestItems=request)
            except AWS_ERRORS as exc:
                raise unavailable("dynamodb", "BatchGetItem", exc) from exc
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
        values = {":state": _s(state.value), ":before": _n(since_before)}
        condition = "#pending = :state AND #since < :before"
        if since_after is not None:
            condition = "#pending = :state AND #since BETWEEN :after AND :before"
            values[":after"] = _n(since_after)
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": PENDING_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#pending": PENDING_STATE, "#since": STATE_SINCE},
            "ExpressionAttributeValues": values,
            "Limit": limit,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = dict(cursor)
        try:
            response = self._db.query(**kwargs)
        except AWS_ERRORS as exc:
            raise unavailable("dynamodb", "Query", exc) from exc
        rows = [_row(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")
