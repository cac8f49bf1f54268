"""The ledger table: its client and settings, its errors, the one call to it, and its reads.

Every request goes through ``call``, where botocore's errors become ours once; every
conditional write through ``write``, which asks for the refusing item back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from boto3.dynamodb.conditions import Key

from scrape_pipeline.aws_errors import AWS_ERRORS, is_condition_failed, refused_item, unavailable
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger.attributes import PENDING_INDEX, Attr
from scrape_pipeline.ledger.expressions import Condition, Update, expressions
from scrape_pipeline.ledger.rows import Item, LedgerRow, encode, from_item

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

DEFAULT_TTL_DAYS = 90
# One reopen usually settles a job closed as unknown, a second covers one that met the API's
# lag; beyond three the evidence is a loop (or a replayer's): the dead letter stands.
DEFAULT_MAX_REOPENS = 3

type Operation = Literal[
    "GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem"
]


class LedgerError(PipelineError):
    """Base of the ledger's own errors (AWS failures raise ``AWSUnavailableError``)."""


class LeaseLostError(LedgerError):
    """The caller no longer holds the job's lease; ``row`` is the row as it is now."""

    def __init__(self, key: JobKey, row: LedgerRow | None) -> None:
        super().__init__(f"lease on {key.pk} is not held")
        self.key = key
        self.row = row


class ConditionFailedError(LedgerError):
    """A conditional write was refused; ``old`` is the item as it was (None: no item)."""

    def __init__(self, pk: str, old: Mapping[str, Any] | None) -> None:
        super().__init__(f"the condition on {pk} did not hold")
        self.pk = pk
        self.old = old


def call(db: DynamoDBClient, operation: Operation, **request: Any) -> dict[str, Any]:
    """``operation`` sent to DynamoDB: its response, ``ConditionFailedError`` (the item as it
    was) or ``AWSUnavailableError`` (try again later)."""
    send: Callable[..., Any] = getattr(db, _snake(operation))
    try:
        return dict(send(**request))
    except AWS_ERRORS as exc:
        if is_condition_failed(exc):
            pk = (request.get("Key") or request["Item"])[Attr.PK]["S"]
            raise ConditionFailedError(pk, refused_item(exc)) from exc
        raise unavailable("dynamodb", operation, exc) from exc


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def write(
    db: DynamoDBClient,
    table: str,
    condition: Condition,
    *,
    pk: str | None = None,
    item: Item | None = None,
    update: Update | None = None,
    returns_new: bool = False,
) -> dict[str, Any]:
    """The one conditional write: ``item`` put, else the row at ``pk`` updated (or, with no
    ``update``, deleted) if ``condition`` holds; a refusal carries the row that won."""
    request: dict[str, Any] = {"TableName": table, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    if item is not None:
        operation: Operation = "PutItem"
        request["Item"] = item
    else:
        operation = "DeleteItem" if update is None else "UpdateItem"
        request["Key"] = {Attr.PK.value: encode(pk or "")}
    if returns_new:
        request["ReturnValues"] = "ALL_NEW"
    return call(db, operation, **request, **expressions(update=update, condition=condition))


def in_state(state: JobState, since: float) -> Update:
    """An update that puts a row in ``state`` (not DONE) from ``since``, in the pending index."""
    return (
        Update().set(Attr.STATE, state).set(Attr.PENDING_STATE, state).set(Attr.STATE_SINCE, since)
    )


class LedgerTable:
    """The table, its client and its settings, and its reads: what every role shares."""

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        ttl_days: int = DEFAULT_TTL_DAYS,
        max_reopens: int = DEFAULT_MAX_REOPENS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if client is None:
            import boto3  # noqa: PLC0415 - only when no client is injected

            client = boto3.client("dynamodb")
        self.table_name = table_name
        self.client = client
        self.ttl_seconds = ttl_days * 86_400
        self.max_reopens = max_reopens
        self.clock = clock

    def expiry(self, now: float) -> int:
        """When a row written at ``now`` expires (``expires_at``): a TTL after its last change."""
        return int(now) + self.ttl_seconds

    def _update(
        self,
        key: JobKey,
        condition: Condition,
        update: Update,
        now: float,
        *,
        returns_new: bool = False,
    ) -> dict[str, Any]:
        """``write`` of a job's row updated at ``now``, with ``updated_at`` and the TTL."""
        update.set(Attr.UPDATED_AT, now).set(Attr.EXPIRES_AT, self.expiry(now))
        return write(
            self.client,
            self.table_name,
            condition,
            pk=key.pk,
            update=update,
            returns_new=returns_new,
        )

    def get(self, key: JobKey) -> LedgerRow | None:
        """The job's row, read consistently; None when unknown."""
        item = call(
            self.client,
            "GetItem",
            TableName=self.table_name,
            Key={Attr.PK.value: encode(key.pk)},
            ConsistentRead=True,
        ).get("Item")
        return from_item(item) if item else None

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
        """Rows in ``state`` (not DONE) since before ``since_before`` (and from ``since_after``,
        a resume point that stays valid however rows before it moved), oldest first, a page."""
        if state is JobState.DONE:
            raise ValueError("DONE rows are not in the pending index")
        since = Key(Attr.STATE_SINCE)
        key = Key(Attr.PENDING_STATE).eq(state) & (
            since.lt(since_before)
            if since_after is None
            else since.between(since_after, since_before)
        )
        request = {"TableName": self.table_name, "IndexName": PENDING_INDEX, "Limit": limit}
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        response = call(self.client, "Query", **request, **expressions(key=key))
        rows = [from_item(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")
