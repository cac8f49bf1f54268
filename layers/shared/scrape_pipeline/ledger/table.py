"""The ledger table: its client, its settings, and the one conditional write."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWS_ERRORS, is_condition_failed, refused_item, unavailable
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.errors import ConditionFailedError
from scrape_pipeline.ledger.expressions import Update

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

DEFAULT_TTL_DAYS = 90
# Evidence that a job closed as "unknown" or "never settled" did settle comes from its webhook,
# the job list and the delivery log; one reopen usually settles it, a second covers a reopen
# that still met the API's lag. Beyond three, the evidence is a loop (or a replayer's), and the
# dead-letter record stands for an operator to look at.
DEFAULT_MAX_REOPENS = 3


def in_state(state: JobState, since: float) -> Update:
    """An update that puts a row in ``state`` (not DONE) from ``since``, in the pending index."""
    return (
        Update().set(Attr.STATE, state).set(Attr.PENDING_STATE, state).set(Attr.STATE_SINCE, since)
    )


_METHODS = {"PutItem": "put_item", "UpdateItem": "update_item", "DeleteItem": "delete_item"}


def _write(db: DynamoDBClient, operation: str, **request: Any) -> dict[str, Any]:
    """The one conditional write: every PutItem, UpdateItem or DeleteItem with a condition.

        condition holds ───▶ written; DynamoDB's response comes back
        condition fails ───▶ nothing written; ConditionFailedError(the item as it was)
        AWS fails ─────────▶ AWSUnavailableError: try again later

    Uniqueness and order are the database's: the condition decides in the same call as the
    write, and a refusal carries the row that won (``ALL_OLD``), so no second read is needed.
    """
    send: Callable[..., Any] = getattr(db, _METHODS[operation])
    try:
        response = send(**request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
    except AWS_ERRORS as exc:
        if is_condition_failed(exc):
            pk = (request.get("Key") or request["Item"])[Attr.PK]["S"]
            raise ConditionFailedError(pk, refused_item(exc)) from exc
        raise unavailable("dynamodb", operation, exc) from exc
    return dict(response)


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
