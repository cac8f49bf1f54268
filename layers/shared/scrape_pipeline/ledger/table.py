"""The ledger table: its client and settings, its errors, and ``call`` (botocore's errors made
ours) under the one conditional ``write`` (the refusing item comes back)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from botocore import xform_name

from scrape_pipeline.aws_errors import AWS_ERRORS, is_condition_failed, refused_item, unavailable
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import Condition, Update, expressions, state_is
from scrape_pipeline.ledger.rows import Item, LedgerRow, Value, encode, from_item

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

    from scrape_pipeline.ledger.lifecycle import Move

DEFAULT_TTL_DAYS = 90
# One reopen usually settles a job closed as unknown, a second covers one that met the API's
# lag; beyond three the evidence is a loop (or a replayer's): the dead letter stands.
DEFAULT_MAX_REOPENS = 3

type Operation = Literal[
    "GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem"
]


class LedgerError(PipelineError):
    """Base of the ledger's own errors (AWS failures raise ``AWSUnavailableError``)."""


class ConditionFailedError(LedgerError):
    """A conditional write was refused; ``old`` is the item as it was (None: no item)."""

    def __init__(self, old: Mapping[str, Any] | None) -> None:
        super().__init__("a conditional write's condition did not hold")
        self.old = old


def call(db: DynamoDBClient, operation: Operation, **request: Any) -> dict[str, Any]:
    """``operation``'s response, else ``ConditionFailedError`` or ``AWSUnavailableError``."""
    send: Callable[..., Any] = getattr(db, xform_name(operation))
    try:
        return dict(send(**request))
    except AWS_ERRORS as exc:
        if is_condition_failed(exc):
            raise ConditionFailedError(refused_item(exc)) from exc
        raise unavailable("dynamodb", operation, exc) from exc


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
    """The one conditional write: ``item`` put, else the row at ``pk`` updated (no ``update``:
    deleted) if ``condition`` holds; a refusal carries the row that won."""
    request: dict[str, Any] = {"TableName": table, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    if returns_new:
        request["ReturnValues"] = "ALL_NEW"
    request |= expressions(UpdateExpression=update, ConditionExpression=condition)
    if item is not None:
        return call(db, "PutItem", Item=item, **request)
    operation: Operation = "DeleteItem" if update is None else "UpdateItem"
    return call(db, operation, Key={Attr.PK.value: encode(str(pk))}, **request)


def in_state(state: JobState, since: float) -> Update:
    """An update that puts a row in ``state`` (not DONE) from ``since``, in the pending index."""
    return (
        Update().set(Attr.STATE, state).set(Attr.PENDING_STATE, state).set(Attr.STATE_SINCE, since)
    )


class LedgerTable:
    """The table, its client and its settings: what every role shares."""

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
        """When a row written at ``now`` expires: a TTL after its last change."""
        return int(now) + self.ttl_seconds

    def new_values(
        self, key: JobKey, now: float, source: str, state: JobState
    ) -> dict[Attr, Value]:
        """A new row's attributes but its key and what its writer may know (detail, ...)."""
        return {
            Attr.KIND: key.kind,
            Attr.JOB_ID: key.job_id,
            Attr.STATE: state,
            Attr.PENDING_STATE: state,
            Attr.STATE_SINCE: now,
            Attr.CREATED_AT: now,
            Attr.UPDATED_AT: now,
            Attr.EXPIRES_AT: self.expiry(now),
            Attr.SOURCE: source,
            # Lets the writer undo its own row, and only its own (forget_unsent).
            Attr.TOKEN: uuid.uuid4().hex,
            Attr.ATTEMPTS: 0,
        }

    def _moved(
        self, key: JobKey, move: Move, update: Update, guard: Condition, now: float
    ) -> LedgerRow | None:
        """``move`` written if ``guard`` holds too: the row as written, else None."""
        try:
            return self._update(key, state_is(move) & guard, update, now)
        except ConditionFailedError:
            return None

    def _update(self, key: JobKey, condition: Condition, update: Update, now: float) -> LedgerRow:
        """``write`` of a job's row at ``now``, with ``updated_at`` and the TTL: the row as
        written."""
        update.set(Attr.UPDATED_AT, now).set(Attr.EXPIRES_AT, self.expiry(now))
        table, pk = self.table_name, key.pk
        response = write(self.client, table, condition, pk=pk, update=update, returns_new=True)
        return from_item(response["Attributes"])

    def get(self, key: JobKey) -> LedgerRow | None:
        """The job's row, read consistently; None when unknown."""
        item = self.get_item(key.pk)
        return from_item(item) if item else None

    def get_item(self, pk: str) -> Item | None:
        """The item at ``pk`` (a job's or a bookkeeping row), read consistently; None if none."""
        key = {Attr.PK.value: encode(pk)}
        return call(
            self.client, "GetItem", TableName=self.table_name, Key=key, ConsistentRead=True
        ).get("Item")
