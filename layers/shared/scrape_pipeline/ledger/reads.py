"""Reading rows in bulk: a hundred by key, a page of those waiting in one state, a Scan."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger.attributes import PENDING_INDEX, Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Condition, Field, expressions
from scrape_pipeline.ledger.rows import LedgerRow, encode, from_item
from scrape_pipeline.ledger.table import LedgerError, LedgerTable, call


def _since(before: float, after: float | None) -> Condition:
    since = Key(Attr.STATE_SINCE)
    return since.lt(before) if after is None else since.between(after, before)


class Reads(LedgerTable):
    """Rows read by the hundred (consistently), by the pending index, or by a Scan."""

    def get_many(self, keys: Sequence[JobKey]) -> dict[JobKey, LedgerRow]:
        """The rows of up to 100 jobs in one read (missing jobs are absent from the result)."""
        if len(keys) > 100:
            raise ValueError("at most 100 keys per read")
        items = self.batch_items([k.pk for k in keys]) if keys else []
        return {row.key: row for row in map(from_item, items)}

    def batch_items(self, pks: Sequence[str]) -> list[dict[str, Any]]:
        """The raw items of up to 100 partition keys, in one BatchGetItem (and its retries)."""
        keys = [{Attr.PK.value: encode(pk)} for pk in dict.fromkeys(pks)]
        request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
        items: list[dict[str, Any]] = []
        for _ in range(8):  # unprocessed keys come back under load: ask for them again
            response = call(self.client, "BatchGetItem", RequestItems=request)
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
        """A page of rows in ``state`` (not DONE) since before ``since_before`` (and from
        ``since_after``, a resume point that stays valid however rows moved), oldest first."""
        if state is JobState.DONE:
            raise ValueError("DONE rows are not in the pending index")
        key = Key(Attr.PENDING_STATE).eq(state) & _since(since_before, since_after)
        request = {"TableName": self.table_name, "IndexName": PENDING_INDEX, "Limit": limit}
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        response = call(self.client, "Query", **request, **expressions(KeyConditionExpression=key))
        rows = [from_item(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")

    def created_since(
        self, kind: JobKind, since: float, until: float | None = None
    ) -> Iterator[str]:
        """The ids of ``kind``'s jobs first written from ``since`` (to ``until``): a filtered
        Scan, an operator's call billed as the whole table."""
        created, low = Field(Attr.CREATED_AT), Decimal(repr(since))  # exact, not to the ms
        bound = created.gte(low) if until is None else created.between(low, Decimal(repr(until)))
        for item in self.scan_jobs(only=Field(Attr.PK).begins_with(f"{kind.value}#") & bound):
            yield JobKey.from_pk(item[Attr.PK.value]["S"]).job_id

    def scan_jobs(
        self, *attributes: Attr, only: Condition | None = None
    ) -> Iterator[dict[str, Any]]:
        """The job rows' items (bookkeeping rows skipped), projected to the key and
        ``attributes``, page by page."""
        request: dict[str, Any] = {"TableName": self.table_name}
        request |= expressions(FilterExpression=only, ProjectionExpression=(Attr.PK, *attributes))
        while True:
            page = call(self.client, "Scan", **request)
            for item in page.get("Items", []):
                if not item[Attr.PK]["S"].startswith(tuple(RowPrefix)):
                    yield dict(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
