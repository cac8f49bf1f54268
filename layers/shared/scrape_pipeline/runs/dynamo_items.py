"""The run journal's items in DynamoDB's form: keys, attribute values, a move's condition, the
one way the journal and the run heads call DynamoDB; and a recording move written with its
job's ledger row in one transaction (``Announcer``): a batch or crawl (no API lists them) is
never recorded without its row; a row that exists already is linked, not put."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore import xform_name

from scrape_pipeline.aws_errors import (
    AWS_ERRORS,
    CANCELLED_BY_CONDITION,
    AWSUnavailableError,
    cancellation_codes,
    is_condition_failed,
    unavailable,
)
from scrape_pipeline.events.outbox import retell_with_run
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.attributes import Attr, RowPrefix
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.runs.journal import FIELDS, Entry
from scrape_pipeline.runs.moves import EntryState, Guard, Move
from scrape_pipeline.runs.plan import Run, RunMode

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient


PK: Final = str(Attr.PK)
TTL: Final = str(Attr.EXPIRES_AT)
_NUMBERS: Final = frozenset({"lease_until", "posted_at", "doubted_at", "updated_at"})
_GUARDS: Final[Mapping[Guard, str]] = {
    Guard.NONE: "",
    Guard.HOLDER: " AND #owner = :guard",
    Guard.LEASE_EXPIRED: " AND lease_until <= :guard",
    Guard.NOT_ANNOUNCED: " AND announced = :false",
}


def head_key(name: str) -> str:
    """The key of a run's head item."""
    return f"{RowPrefix.RUN}{name}"


def entry_key(name: str, index: int) -> str:
    """The key of one entry of a run."""
    return f"{RowPrefix.RUN}{name}#{index}"


def written(db: DynamoDBClient, operation: str, **request: Any) -> bool:
    """One conditional write (``send``); False if its condition did not hold."""
    try:
        send(db, operation, **request)
    except _RefusedError:
        return False
    return True


def send(db: DynamoDBClient, operation: str, **request: Any) -> dict[str, Any]:
    """One DynamoDB call; a refused condition is ``_RefusedError``, any other failure
    ``AWSUnavailableError``."""
    try:
        return dict(getattr(db, xform_name(operation))(**request))
    except AWS_ERRORS as exc:
        if is_condition_failed(exc):
            raise _RefusedError(operation) from exc
        raise unavailable("dynamodb", operation, exc) from exc


class _RefusedError(Exception):
    """A conditional write's condition did not hold (answered inside the journal)."""


def condition(move: Move, guard_value: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A move's condition: its sources, then its guard's clause, with their placeholders."""
    sources = {f":from{i}": {"S": s.value} for i, s in enumerate(move.sources)}
    values: dict[str, Any] = dict(sources)
    names = {"#st": "state"}
    if move.guard is Guard.HOLDER:
        names["#owner"] = "owner"
        values[":guard"] = encode({"owner": guard_value})["owner"]
    elif move.guard is Guard.LEASE_EXPIRED:
        values[":guard"] = {"N": repr(float(guard_value))}
    elif move.guard is Guard.NOT_ANNOUNCED:
        values[":false"] = {"BOOL": False}
    return f"#st IN ({', '.join(sources)}){_GUARDS[move.guard]}", names, values


def encode(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Entry fields as DynamoDB attribute values (None: NULL, so a move can clear a field)."""
    encoded: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if value is None:
            encoded[name] = {"NULL": True}
        elif isinstance(value, bool):
            encoded[name] = {"BOOL": value}
        elif name in _NUMBERS:
            encoded[name] = {"N": repr(float(value))}
        else:
            encoded[name] = {"S": str(value)}
    return encoded


def entry_item(entry: Entry, ttl_s: float) -> dict[str, Any]:
    """A new entry's item: its URLs compressed, its state, not announced, its expiry."""
    urls = zlib.compress(json.dumps(entry.urls).encode())
    item = {PK: {"S": entry_key(entry.run, entry.index)}, "urls": {"B": urls}}
    item.update(encode({"state": entry.state, "announced": False}))
    item.update(encode({"updated_at": entry.updated_at}))
    item[TTL] = {"N": str(int((entry.updated_at or 0.0) + ttl_s))}
    return item


def _decode(value: Mapping[str, Any]) -> Any:
    if "NULL" in value:
        return None
    if "BOOL" in value:
        return bool(value["BOOL"])
    if "N" in value:
        return float(value["N"])
    return value.get("S")


def entry_of(run: str, item: Mapping[str, Any]) -> Entry:
    index = int(item[PK]["S"].rsplit("#", 1)[1])
    fields = {name: _decode(item[name]) for name in FIELDS if name in item}
    fields["state"] = EntryState(fields["state"])
    fields["announced"] = bool(fields.get("announced", False))
    urls = tuple(json.loads(zlib.decompress(bytes(item["urls"]["B"]))))
    return Entry(run=run, index=index, urls=urls, **fields)


def run_of(name: str, item: Mapping[str, Any]) -> Run:
    """The run a head item describes."""
    return Run(
        name=name,
        mode=RunMode(item["mode"]["S"]),
        fingerprint=item["fingerprint"]["S"],
        options=json.loads(item["options"]["S"]),
        entries=int(item["entries"]["N"]),
        urls=int(item["urls"]["N"]),
        created_at=float(item["created_at"]["N"]),
    )


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
