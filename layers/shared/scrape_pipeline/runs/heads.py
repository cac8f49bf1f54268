"""A run's head as its completion reads and writes it: owing ``Run Completed`` (in the outbox
index from planning until the bus took it), and how far its entries are checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.ledger.attributes import OUTBOX_INDEX, Attr, RowPrefix
from scrape_pipeline.runs.dynamo_items import head_key, run_of, send, written
from scrape_pipeline.runs.plan import Run

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

CHECKED: Final = "checked"
COMPLETED_AT: Final = "completed_at"
_PK: Final = str(Attr.PK)


@dataclass(frozen=True)
class Head:
    """What the run sweep reads of a head: the run and its completion's progress."""

    run: Run
    planned: bool
    checked: int = 0
    completed: str | None = None  # the Run Completed event's text, once written


class RunHeads:
    """The heads of the runs in the ledger's table, as their completion sees them."""

    def __init__(self, table_name: str, *, client: DynamoDBClient) -> None:
        self.table_name = table_name
        self._db = client

    def owing(
        self, *, limit: int, cursor: Mapping[str, Any] | None = None
    ) -> tuple[list[str], dict[str, Any] | None]:
        """One page of the outbox index: the names of the runs whose event is still owed."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": OUTBOX_INDEX,
            "Limit": limit,
            "FilterExpression": "begins_with(#pk, :run)",
            "ExpressionAttributeNames": {"#pk": _PK},
            "ExpressionAttributeValues": {":run": {"S": str(RowPrefix.RUN)}},
            "ProjectionExpression": "#pk",
        }
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        page = send(self._db, "Scan", **request)
        names = [item[_PK]["S"].removeprefix(RowPrefix.RUN) for item in page.get("Items", [])]
        return names, page.get("LastEvaluatedKey")

    def get(self, name: str) -> Head | None:
        """The run's head, read consistent (None: no such run)."""
        key = {_PK: {"S": head_key(name)}}
        request = {"TableName": self.table_name, "Key": key, "ConsistentRead": True}
        item = send(self._db, "GetItem", **request).get("Item")
        if not item:
            return None
        return Head(
            run=run_of(name, item),
            planned=bool(item.get("planned", {}).get("BOOL", False)),
            checked=int(item.get(CHECKED, {}).get("N", "0")),
            completed=item.get(str(Attr.OUTBOX_EVENT), {}).get("S"),
        )

    def checked(self, name: str, index: int) -> None:
        """Entries before ``index`` are settled for good (never moves back)."""
        self._update(
            name,
            "SET #checked = :i",
            "attribute_not_exists(#checked) OR #checked < :i",
            {":i": {"N": str(index)}},
            names={"#checked": CHECKED},
        )

    def complete(self, name: str, event: str, now: float) -> str:
        """Write the run's ``event`` once; the event the head holds (the first writer's)."""
        written = self._update(
            name,
            "SET #event = :event, #completed = :now",
            "attribute_not_exists(#event)",
            {":event": {"S": event}, ":now": {"N": f"{now:.3f}"}},
            names={"#event": str(Attr.OUTBOX_EVENT), "#completed": COMPLETED_AT},
        )
        if written:
            return event
        head = self.get(name)
        return head.completed if head and head.completed else event

    def told(self, name: str, event: str) -> bool:
        """The bus took ``event``: the head leaves the outbox index; False if it holds another."""
        names = {"#at": str(Attr.OUTBOX_AT), "#event": str(Attr.OUTBOX_EVENT)}
        return self._update(
            name, "REMOVE #at", "#event = :event", {":event": {"S": event}}, names=names
        )

    def _update(
        self,
        name: str,
        update: str,
        condition: str,
        values: Mapping[str, Any],
        *,
        names: Mapping[str, str],
    ) -> bool:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {_PK: {"S": head_key(name)}},
            "UpdateExpression": update,
            "ConditionExpression": f"attribute_exists(#pk) AND ({condition})",
            "ExpressionAttributeNames": {"#pk": _PK, **names},
            "ExpressionAttributeValues": dict(values),
        }
        return written(self._db, "UpdateItem", **request)
