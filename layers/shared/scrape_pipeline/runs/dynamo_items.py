"""The run journal's items in DynamoDB's form: keys, attribute values, a move's condition, and
the one way the journal and the run heads call DynamoDB."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from botocore import xform_name

from scrape_pipeline.aws_errors import AWS_ERRORS, is_condition_failed, unavailable
from scrape_pipeline.ledger.attributes import PARTITION_KEY, TTL_ATTRIBUTE, RowPrefix
from scrape_pipeline.runs.journal import FIELDS, Entry
from scrape_pipeline.runs.moves import EntryState, Guard, Move

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient


PK: Final = str(PARTITION_KEY)
TTL: Final = str(TTL_ATTRIBUTE)
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
