"""The ledger table: its client and settings, the one call to it and the one conditional write.

Every request the package makes goes through ``call``, where botocore's errors become ours
once; every conditional write (a job's row or a bookkeeping row, put, updated or deleted)
goes through ``_write``, which builds its expressions and asks for the refusing item back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from scrape_pipeline.aws_errors import AWS_ERRORS, is_condition_failed, refused_item, unavailable
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.errors import ConditionFailedError
from scrape_pipeline.ledger.expressions import Condition, Update, expressions
from scrape_pipeline.ledger.rows import Item, encode

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

DEFAULT_TTL_DAYS = 90
# Evidence that a job closed as "unknown" or "never settled" did settle comes from its webhook,
# the job list and the delivery log; one reopen usually settles it, a second covers a reopen
# that still met the API's lag. Beyond three, the evidence is a loop (or a replayer's), and the
# dead-letter record stands for an operator to look at.
DEFAULT_MAX_REOPENS = 3

type Operation = Literal[
    "GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem"
]
type Write = Literal["PutItem", "UpdateItem", "DeleteItem"]
_METHODS: dict[Operation, str] = {
    "GetItem": "get_item",
    "BatchGetItem": "batch_get_item",
    "Query": "query",
    "Scan": "scan",
    "PutItem": "put_item",
    "UpdateItem": "update_item",
    "DeleteItem": "delete_item",
}


def call(db: DynamoDBClient, operation: Operation, **request: Any) -> dict[str, Any]:
    """``operation`` sent to DynamoDB, its response back; botocore's errors translated here.

    answered ──────────▶ DynamoDB's response
    condition fails ───▶ nothing written; ConditionFailedError(the item as it was)
    AWS fails ─────────▶ AWSUnavailableError: try again later
    """
    send: Callable[..., Any] = getattr(db, _METHODS[operation])
    try:
        return dict(send(**request))
    except AWS_ERRORS as exc:
        if is_condition_failed(exc):
            pk = (request.get("Key") or request["Item"])[Attr.PK]["S"]
            raise ConditionFailedError(pk, refused_item(exc)) from exc
        raise unavailable("dynamodb", operation, exc) from exc


def _write(
    db: DynamoDBClient,
    table: str,
    operation: Write,
    condition: Condition,
    *,
    pk: str | None = None,
    item: Item | None = None,
    update: Update | None = None,
    returns_new: bool = False,
) -> dict[str, Any]:
    """The one conditional write: the row at ``pk`` (or ``item``) written if ``condition`` holds.

    Uniqueness and order are the database's: the condition decides in the same call as the
    write, and a refusal carries the row that won (``ALL_OLD``), so no second read is needed.
    """
    request: dict[str, Any] = {"TableName": table, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    if pk is not None:
        request["Key"] = {Attr.PK.value: encode(pk)}
    if item is not None:
        request["Item"] = item
    if returns_new:
        request["ReturnValues"] = "ALL_NEW"
    request |= expressions(UpdateExpression=update, ConditionExpression=condition)
    return call(db, operation, **request)


def in_state(state: JobState, since: float) -> Update:
    """An update that puts a row in ``state`` (not DONE) from ``since``, in the pending index."""
    return (
        Update().set(Attr.STATE, state).set(Attr.PENDING_STATE, state).set(Attr.STATE_SINCE, since)
    )


class LedgerTable:
    """The table, its client and its settings: what every role of the ledger shares."""

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
        self._db = client
        self.ttl_seconds = ttl_days * 86_400
        self.max_reopens = max_reopens
        self.clock = clock

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client (bookkeeping rows share the table)."""
        return self._db

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
        """``_write`` of a job's row updated at ``now``, with ``updated_at`` and the TTL."""
        update.set(Attr.UPDATED_AT, now).set(Attr.EXPIRES_AT, self.expiry(now))
        return _write(
            self._db,
            self.table_name,
            "UpdateItem",
            condition,
            pk=key.pk,
            update=update,
            returns_new=returns_new,
        )
