"""The stack's run journal as the operator reads it: the runtime's ``DynamoJournal`` and what only
the CLI asks of it (every run, for ``runs list``, ``locate`` and ``audit``)."""

from __future__ import annotations

from typing import Any

from scrape_pipeline.ledger.attributes import Attr, RowPrefix
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.plan import Run

_PK = str(Attr.PK)


class TableJournal(DynamoJournal):
    """A ``DynamoJournal`` that can list its runs and be closed like the file journal."""

    def close(self) -> None:
        """Nothing to close (the client is the caller's)."""

    def runs(self) -> list[Run]:
        """Every run of the table, oldest first: a Scan for the heads."""
        names: list[str] = []
        request: dict[str, Any] = {
            "FilterExpression": f"begins_with({_PK}, :run) AND attribute_exists(fingerprint)",
            "ExpressionAttributeValues": {":run": {"S": str(RowPrefix.RUN)}},
            "ProjectionExpression": _PK,
        }
        while True:
            page = self._call("Scan", **request)
            names += [item[_PK]["S"].removeprefix(RowPrefix.RUN) for item in page.get("Items", [])]
            if not page.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        found = [run for name in names if (run := self.run(name)) is not None]
        return sorted(found, key=lambda r: (r.created_at, r.name))
