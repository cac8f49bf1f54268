"""The run journal in the ledger's table (``run#<name>`` heads, ``run#<name>#<index>`` entries):
nothing new to provision or grant, and a batch's job id is written with its ledger row."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.aws_errors import AWS_ERRORS, is_transaction_canceled, unavailable
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.table import DEFAULT_TTL_DAYS
from scrape_pipeline.runs import moves
from scrape_pipeline.runs.dynamo_items import (
    PK,
    TTL,
    Announcer,
    _RefusedError,
    condition,
    encode,
    entry_item,
    entry_key,
    entry_of,
    head_key,
    run_of,
    send,
)
from scrape_pipeline.runs.journal import DEFAULT_LEASE_S, FIELDS, Entry, Journal
from scrape_pipeline.runs.moves import EntryState, Move
from scrape_pipeline.runs.plan import Run, RunMode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from types_boto3_dynamodb.client import DynamoDBClient

_BATCH: Final = 100  # BatchGetItem's and TransactWriteItems' limit
# The moves that record a job id: for a batch or crawl, the ledger row joins their write.
_RECORDING: Final = frozenset({moves.SUBMIT.verb, moves.ADOPT.verb})


class DynamoJournal(Journal):
    """A journal in the ledger table ``table_name`` (``client``: a boto3 DynamoDB client)."""

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient,
        lease_s: float = DEFAULT_LEASE_S,
        ttl_days: int = DEFAULT_TTL_DAYS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(lease_s=lease_s)
        self.table_name = table_name
        self._db = client
        self._ttl_s = ttl_days * 86_400
        self._ledger = Ledger(table_name, client=client, ttl_days=ttl_days)
        self._announcer = Announcer(self._ledger, client=client, sleep=sleep)
        self._modes: dict[str, RunMode] = {}  # a run's mode never changes: read once

    def _insert_run(self, run: Run, entries: Sequence[Entry]) -> bool:
        head = {
            PK: {"S": head_key(run.name)},
            "mode": {"S": run.mode.value},
            "fingerprint": {"S": run.fingerprint},
            "options": {"S": json.dumps(run.options, sort_keys=True, default=str)},
            "entries": {"N": str(run.entries)},
            "urls": {"N": str(run.urls)},
            "created_at": {"N": repr(run.created_at)},
            "planned": {"BOOL": False},
            TTL: {"N": str(int(run.created_at + self._ttl_s))},
            # Owing its Run Completed from the start: in the outbox index until the bus took it.
            str(Attr.OUTBOX_AT): {"N": f"{run.created_at:.3f}"},
        }
        try:
            self._call("PutItem", Item=head, ConditionExpression=f"attribute_not_exists({PK})")
            created = True
        except _RefusedError:
            found = self._get(head_key(run.name))
            if found is None or found["fingerprint"]["S"] != run.fingerprint:
                return False  # another run of that name: the caller says so
            if found["planned"]["BOOL"]:
                return False
            created = False  # its planner stopped half-way: finish its work
        for start in range(0, len(entries), _BATCH):
            self._put_absent([entry_item(e, self._ttl_s) for e in entries[start : start + _BATCH]])
        self._call(
            "UpdateItem",
            Key={PK: {"S": head_key(run.name)}},
            UpdateExpression="SET planned = :true",
            ExpressionAttributeValues={":true": {"BOOL": True}},
        )
        return created

    def _put_absent(self, items: list[dict[str, Any]]) -> None:
        """Put each item unless its key exists: one transaction, else one by one."""
        absent = f"attribute_not_exists({PK})"
        puts = [
            {"Put": {"TableName": self.table_name, "Item": item, "ConditionExpression": absent}}
            for item in items
        ]
        try:
            self._db.transact_write_items(TransactItems=puts)  # type: ignore[arg-type]
            return
        except AWS_ERRORS as exc:
            if not is_transaction_canceled(exc):
                raise unavailable("dynamodb", "TransactWriteItems", exc) from exc
        # Some exist already (a planner before us stopped half-way): the rest one at a time.
        for item in items:
            try:
                self._call("PutItem", Item=item, ConditionExpression=absent)
            except _RefusedError:
                continue

    def run(self, name: str) -> Run | None:
        found = self._get(head_key(name))
        if found is None:
            return None
        run = run_of(name, found)
        self._modes[name] = run.mode
        return run

    def entries(self, name: str, states: Collection[EntryState] = ()) -> list[Entry]:
        run = self.run(name)
        if run is None:
            return []
        wanted = set(states)  # a StrEnum: its values match too
        found = [e for e in self._read_all(name, run.entries) if not wanted or e.state in wanted]
        return sorted(found, key=lambda e: e.index)

    def entries_between(self, name: str, start: int, stop: int) -> list[Entry]:
        """The run's entries ``start`` to ``stop`` (excluded) that exist, in index order, read
        eventually consistent (a stale entry is an earlier move's, never a later one's)."""
        found = self._read_all(name, stop, start=start, consistent=False)
        return sorted(found, key=lambda e: e.index)

    def _read_all(
        self, name: str, count: int, *, start: int = 0, consistent: bool = True
    ) -> Iterator[Entry]:
        for first in range(start, count, _BATCH):
            keys = [
                {PK: {"S": entry_key(name, i)}} for i in range(first, min(count, first + _BATCH))
            ]
            request: dict[str, Any] | None = {
                self.table_name: {"Keys": keys, "ConsistentRead": consistent}
            }
            while request:
                page = send(self._db, "BatchGetItem", RequestItems=request)
                for item in page.get("Responses", {}).get(self.table_name, []):
                    yield entry_of(name, item)
                request = page.get("UnprocessedKeys")  # none, or {}: all read

    def entry(self, name: str, index: int) -> Entry | None:
        found = self._get(entry_key(name, index))
        return None if found is None else entry_of(name, found)

    def holder(self, kind: str, job_id: str) -> str | None:
        """The run holding the ``kind`` job ``job_id``, as its ledger row names it: one GetItem,
        where listing every run is a Scan."""
        row = self._ledger.get(JobKey(JobKind(kind), job_id))
        return row.run if row is not None else None

    def _get(self, key: str) -> dict[str, Any] | None:
        found = self._call("GetItem", Key={PK: {"S": key}}, ConsistentRead=True).get("Item")
        return dict(found) if found else None

    def _write(
        self, run: str, index: int, move: Move, guard_value: Any, values: Mapping[str, Any]
    ) -> Entry | None:
        job_id = values.get("job_id")
        if move.verb in _RECORDING and job_id:
            update = self._update(run, index, move, guard_value, {**values, "announced": True})
            key = JobKey(JobKind(self._mode(run).kind), str(job_id))
            if not self._announcer.write(update, key, run, entry_key(run, index)):
                return None
            return self.entry(run, index)
        try:
            answer = self._call(
                "UpdateItem",
                **self._update(run, index, move, guard_value, values),
                ReturnValues="ALL_NEW",
            )
        except _RefusedError:
            return None
        return entry_of(run, answer["Attributes"])

    def _update(
        self, run: str, index: int, move: Move, guard_value: Any, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The ``UpdateItem`` request of a move: its values, under the move's condition."""
        encoded = encode({name: values[name] for name in values if name in FIELDS})
        names = {f"#{name}": name for name in encoded}
        placeholders = {f":{name}": value for name, value in encoded.items()}
        now = float(values["updated_at"])  # every move writes it (``Journal._move``)
        placeholders[":ttl"] = {"N": str(int(now + self._ttl_s))}
        where, condition_names, condition_values = condition(move, guard_value)
        sets = ", ".join(f"#{name} = :{name}" for name in encoded)
        return {
            "Key": {PK: {"S": entry_key(run, index)}},
            "UpdateExpression": f"SET {sets}, {TTL} = :ttl",
            "ConditionExpression": where,
            "ExpressionAttributeNames": {**names, **condition_names},
            "ExpressionAttributeValues": {**placeholders, **condition_values},
        }

    def _mode(self, run: str) -> RunMode:
        if run not in self._modes:
            self.run(run)
        return self._modes.get(run, RunMode.ASYNC)

    def _call(self, operation: str, **request: Any) -> dict[str, Any]:
        return send(self._db, operation, TableName=self.table_name, **request)
