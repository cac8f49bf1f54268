"""Every verb of the ledger from every state, against the lifecycle table (moto; fake clock).

The ledger derives the state part of its conditions from ``scrape_pipeline.ledger.lifecycle.MOVES``;
this drives each verb, with its guard met, from each state a row can be in (no row included)
and judges the row DynamoDB holds afterwards: a write exactly where the table has a move of
that verb from that state, to one of its to-states, and the row untouched everywhere else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.jobs import REASON_UNKNOWN_JOB, JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger.leases import LeaseLostError
from scrape_pipeline.ledger.lifecycle import ABSENT, MOVES, RECORD, RowState, Verb
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline_local.clock import ManualClock
from tests.conftest import OFFLINE_AWS_ENV
from tests.support.ledger import Ledger, allows
from tests.support.template import create_ledger_table

LEASE = 60.0
HOLDER = "w1"
STATES: tuple[RowState, ...] = (ABSENT, *JobState)


def _clear_outbox(ledger: Ledger, key: JobKey) -> bool:
    """``clear_outbox`` with its guard met: the row (if there is one) owes the event cleared."""
    if ledger.get(key) is not None:
        ledger.client.update_item(
            TableName=ledger.table_name,
            Key={"pk": {"S": key.pk}},
            UpdateExpression="SET outbox_at = :at, outbox_event = :event",
            ExpressionAttributeValues={":at": {"N": "1"}, ":event": {"S": "{}"}},
        )
    return ledger.clear_outbox(key, "{}")


def _retell(ledger: Ledger, key: JobKey) -> bool:
    """``retell`` with its guard met: the row (if there is one) holds the event retold, put
    there for the call and taken away again if it is refused (the row as it was)."""
    if ledger.get(key) is None:
        return ledger.retell(key, "{}", '{"run":"r"}')
    where: dict[str, Any] = {"TableName": ledger.table_name, "Key": {"pk": {"S": key.pk}}}
    ledger.client.update_item(
        **where,
        UpdateExpression="SET outbox_event = :event",
        ExpressionAttributeValues={":event": {"S": "{}"}},
    )
    told = ledger.retell(key, "{}", '{"run":"r"}')
    if not told:
        ledger.client.update_item(**where, UpdateExpression="REMOVE outbox_event")
    return told


# Each verb called with its guard met, on the row as it is (a stand-in when there is none); the
# clock has moved past the lease, so acquire's take-over guard holds too.
CALLS: dict[Verb, Callable[[Ledger, JobKey, LedgerRow], Any]] = {
    Verb.RECORD: lambda ledger, key, row: ledger.record(key, source="s", state=JobState.WATCHING),
    Verb.FORGET_UNSENT: lambda ledger, key, row: ledger.forget_unsent(row),
    Verb.ENQUEUE: lambda ledger, key, row: ledger.enqueue(row),
    Verb.REOPEN: lambda ledger, key, row: ledger.reopened(row),
    Verb.UNCLAIM: lambda ledger, key, row: ledger.unclaim(
        replace(row, state=JobState.RECEIVED, state_since=row.state_since - 1), row
    ),
    Verb.ACQUIRE: lambda ledger, key, row: ledger.acquire(key, "w2", LEASE, source="sqs"),
    Verb.CHECKPOINT: lambda ledger, key, row: ledger.checkpoint(
        key, HOLDER, next_page=2, stored=1, failed=0
    ),
    Verb.RELEASE: lambda ledger, key, row: ledger.release(key, HOLDER),
    Verb.WATCH: lambda ledger, key, row: ledger.watch(key, HOLDER, job_created_at=1.0),
    Verb.FINISH: lambda ledger, key, row: ledger.finish(key, HOLDER, Outcome.STORED),
    Verb.NOTE_LATE_WEBHOOK: lambda ledger, key, row: ledger.note_late_webhook(row),
    Verb.CLEAR_OUTBOX: lambda ledger, key, row: _clear_outbox(ledger, key),
    Verb.LINK_RUN: lambda ledger, key, row: ledger.link_run(key, "r"),
    Verb.RETELL: lambda ledger, key, row: _retell(ledger, key),
    Verb.NOTE_ITEM_RETRY: lambda ledger, key, row: ledger.note_item_retry(key, HOLDER, 3, "3:job"),
    Verb.SETTLE_ITEMS: lambda ledger, key, row: ledger.settle_items(
        key, HOLDER, settled=frozenset({"3:job"}), counts=(1, 0, 0), pages=1
    ),
    Verb.LINK_RETRY: lambda ledger, key, row: ledger.link_retry(key, "batch#b#3"),
    Verb.NOTE_RESUBMISSION: lambda ledger, key, row: ledger.note_resubmission(key, HOLDER, "j2"),
    Verb.CARRY_RUN: lambda ledger, key, row: ledger.carry_run(key, "r"),
}


@pytest.fixture(scope="module")
def table() -> Iterator[tuple[Any, str]]:
    """One moto table for every cell: each uses a job id of its own."""
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        for env, value in OFFLINE_AWS_ENV.items():  # module scope: before the autouse fixture
            mp.setenv(env, value)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)  # in-process moto, whatever ran before
        client = boto3.client("dynamodb")
        yield client, create_ledger_table(client, "ledger-lifecycle")


def _put_in(ledger: Ledger, key: JobKey, state: RowState) -> LedgerRow | None:
    """A row for ``key`` in ``state``, made the way the pipeline makes one; None for no row."""
    if state is ABSENT:
        return None
    if state in RECORD.targets:
        return ledger.record(key, source="webhook", state=state).row
    granted = ledger.acquire(key, HOLDER, LEASE, source="sqs").row
    if state is JobState.PROCESSING:
        return granted
    # A close that evidence reopens, so that reopen's guard holds.
    return ledger.finish(key, HOLDER, Outcome.DEAD_LETTERED, {"reason": REASON_UNKNOWN_JOB})


def _item(client: Any, table: str, key: JobKey) -> dict[str, Any] | None:
    found = client.get_item(TableName=table, Key={"pk": {"S": key.pk}}, ConsistentRead=True)
    item: dict[str, Any] | None = found.get("Item")
    return item


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
@pytest.mark.parametrize("verb", Verb)
def test_ledger_writes_exactly_the_moves_of_the_lifecycle_table(
    table: tuple[Any, str], verb: Verb, state: RowState
):
    # GIVEN a row in ``state`` (or none), and the clock past its lease
    client, name = table
    clock = ManualClock()
    ledger = Ledger(name, client=client, clock=clock)
    key = JobKey(JobKind.EXTRACT, f"{verb.value}-{state.value}")
    row = _put_in(ledger, key, state) or LedgerRow(key, JobState.RECEIVED, 0.0, 0.0, "s")
    before = _item(client, name, key)
    clock.advance(LEASE + 1)

    # WHEN the verb is called with its guard met
    with contextlib.suppress(LeaseLostError):  # the leased verbs' refusal
        CALLS[verb](ledger, key, row)

    # THEN the row moved by a move of the table, or, where the table has none, not at all
    after = _item(client, name, key)
    moved_to: RowState = ABSENT if after is None else JobState(after["state"]["S"])
    may = [move for move in MOVES if move.verb is verb and state in move.sources]
    if not may:
        assert after == before, f"{verb} wrote a {state.value} row: the table has no such move"
        return
    assert after != before, f"{verb} refused a {state.value} row: the table has {may}"
    assert any(allows(move, state, moved_to) for move in may), (
        f"{verb} took a {state.value} row to {moved_to.value}, not a to-state of {may}"
    )
