"""A recording move and its job's ledger row in one transaction: a batch or crawl (no API
lists them) is never recorded without its row; a row that exists already is linked, not put."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.aws_errors import (
    AWS_ERRORS,
    CANCELLED_BY_CONDITION,
    AWSUnavailableError,
    cancellation_codes,
    unavailable,
)
from scrape_pipeline.events.outbox import retell_with_run
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.full import Ledger

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient

# Cancellation reasons that say "try again", not "refused" (AWS's, never moto's).
_RETRYABLE: Final = frozenset(
    {
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)
_ATTEMPTS: Final = 5
_BACKOFF_S: Final = 0.05


class Announcer:
    """Writes a recording move with its job's ledger row, in the ledger table ``ledger``."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        client: DynamoDBClient,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._ledger = ledger
        self._db = client
        self._sleep = sleep  # between tries of a transaction that met a concurrent write

    def write(self, update: dict[str, Any], key: JobKey, run: str, what: str) -> bool:
        """The move's ``update`` and ``key``'s ledger row in one transaction; False if the
        move is refused. ``what`` names the entry."""
        now = float(update["ExpressionAttributeValues"][":updated_at"]["N"])
        put = self._ledger.submitted_put(key, now, run=run)
        link = self._ledger.link_run_update(key, run)
        # The row's write: its put, or (once the row is found to exist) its link to the run.
        second = {False: {"Put": put}, True: {"Update": link}}
        row_exists, codes = False, ["None"]
        for attempt in range(_ATTEMPTS):
            cancelled = self._transact([{"Update": update}, second[row_exists]])
            if cancelled is None:
                if row_exists:
                    self._retell(key, run)
                return True
            codes = cancelled
            if codes[0] == CANCELLED_BY_CONDITION:
                return False
            if codes[1] == CANCELLED_BY_CONDITION:
                # The row exists (its webhook came first: it is left as it is), or vanished
                # before the check (a webhook's row its writer undid): the other form, at once.
                row_exists = not row_exists
                continue
            if not set(codes) & _RETRYABLE:
                break
            if attempt < _ATTEMPTS - 1:
                self._sleep(_BACKOFF_S * 2**attempt)
        raise _unwritten(codes, key, what)

    def _retell(self, key: JobKey, run: str) -> None:
        """A row linked to its run after it settled: its event is owed again naming it."""
        row = self._ledger.get(key)
        if row is not None and row.run == run:
            retell_with_run(self._ledger, row)

    def _transact(self, items: list[dict[str, Any]]) -> list[str] | None:
        """One ``TransactWriteItems``: None when written, else each item's cancellation code."""
        for item in items:
            next(iter(item.values()))["TableName"] = self._ledger.table_name
        try:
            self._db.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except AWS_ERRORS as exc:
            codes = cancellation_codes(exc, 2)
            if codes is None:
                raise unavailable("dynamodb", "TransactWriteItems", exc) from exc
            return codes
        return None


def _unwritten(codes: Sequence[str], key: JobKey, what: str) -> AWSUnavailableError:
    """The retryable error of a transaction given up on: the first reason it was cancelled."""
    return AWSUnavailableError(
        "dynamodb",
        "TransactWriteItems",
        next((c for c in codes if c != "None"), "TransactionCanceled"),
        f"{what} and the ledger row of {key.pk} were not written; run the same command again",
    )
