"""The whole table, page by page: for operators and benchmarks, never the pipeline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.attributes import Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Projection, expressions
from scrape_pipeline.ledger.table import LedgerTable, call


@dataclass(frozen=True)
class RowCounts:
    """The result of ``Ledger.count_rows``: job rows by state, DONE rows by outcome."""

    by_state: dict[str, int]
    by_outcome: dict[str, int]

    @property
    def jobs(self) -> int:
        """How many job rows there are, whatever their state."""
        return sum(self.by_state.values())


class Scans(LedgerTable):
    """Every job row, by paginated Scans of a few attributes (bookkeeping rows skipped)."""

    def job_keys(self) -> Iterator[JobKey]:
        """Every job's key (bookkeeping rows skipped), by a paginated Scan of the keys alone."""
        for item in self._scan():
            yield JobKey.from_pk(item[Attr.PK]["S"])

    def count_rows(self) -> RowCounts:
        """Job rows by state and DONE rows by outcome, by a paginated Scan of three attributes."""
        by_state: Counter[str] = Counter()
        by_outcome: Counter[str] = Counter()
        for item in self._scan(Attr.STATE, Attr.OUTCOME):
            by_state[item.get(Attr.STATE, {}).get("S", "?")] += 1
            if Attr.OUTCOME in item:
                by_outcome[item[Attr.OUTCOME]["S"]] += 1
        return RowCounts(dict(sorted(by_state.items())), dict(sorted(by_outcome.items())))

    def created_since(self, kind: JobKind, since: float) -> Iterator[str]:
        """The ids of ``kind``'s jobs created at or after ``since``, by a filtered Scan (billed
        as a read of the whole table: an operator's call, never the pipeline's)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "ProjectionExpression": "#pk",
            "FilterExpression": "begins_with(#pk, :prefix) AND #created >= :since",
            "ExpressionAttributeNames": {"#pk": Attr.PK.value, "#created": Attr.CREATED_AT.value},
            "ExpressionAttributeValues": {
                ":prefix": {"S": f"{kind.value}#"},
                ":since": {"N": repr(since)},
            },
        }
        while True:
            page = call(self._db, "Scan", **request)
            for item in page.get("Items", []):
                yield JobKey.from_pk(item[Attr.PK.value]["S"]).job_id
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _scan(self, *attributes: Attr) -> Iterator[dict[str, Any]]:
        """The job rows' items, projected to the key and ``attributes``, page by page."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            **expressions(ProjectionExpression=Projection((Attr.PK, *attributes))),
        }
        while True:
            page = call(self._db, "Scan", **request)
            for item in page.get("Items", []):
                if not item[Attr.PK]["S"].startswith(tuple(RowPrefix)):
                    yield dict(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
