"""The ledger's items as the code before the package split wrote and read them (moto).

``ledger_items.json`` was captured from main at 5b679f1 (``ledger.py`` in one module) by
running ``python -m tests.ledger.test_ledger_items`` there: the scenario below, step by step,
with the table's items after each step, what the step returned, the rows ``get`` read back
and how many DynamoDB calls of each operation the step made. The package must write the
same items byte for byte, return the same values, read old items as the old code read them,
and make no more calls. Regenerate it only from the code that wrote production's rows.
"""

from __future__ import annotations

import itertools
import json
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.jobs import REASON_UNKNOWN_JOB, JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.leases import LeaseLostError, Streak
from scrape_pipeline_local.clock import ManualClock
from tests.support.ledger import Ledger
from tests.support.template import create_ledger_table

GOLDEN = Path(__file__).with_name("ledger_items.json")
# Row fields added after the golden was recorded: compared only where a step sets them.
TABLE = "ledger-items"
A = JobKey(JobKind.EXTRACT, "a")
B = JobKey(JobKind.BATCH, "b")
C = JobKey(JobKind.CRAWL, "c")
D = JobKey(JobKind.EXTRACT, "d")
type Step = tuple[str, Callable[[], Any]]
# Steps whose enqueue or reopen returns the row as written (DynamoDB's ALL_NEW), where the
# single module returned the row as read with its moved fields replaced: the TTL the write
# pushed (a TTL from the write's state_since) is the one difference.
AS_WRITTEN = {"wake", "reopened then unclaimed", "woken then unclaimed"}
TTL_SECONDS = 90 * 86_400
# Fields added after the capture (a batch's retried items), with the value every row of
# the scenario has: left out of the comparison when at it, so the capture stays as it was.
ADDED_SINCE: dict[str, Any] = {
    "items_cancelled": 0,
    "retrying_items": [],
    "retry_posting": [],
    "posted_at": None,
    "pages_stored": 0,
    "retry_of": None,
    "run": None,
    "outbox_event": None,
    "outbox_at": None,
    "items": None,  # RowCounts, unless asked for
}


def _plain(value: Any) -> Any:
    """``value`` as JSON: rows and results field by field, keys as ``pk``, sets sorted."""
    if isinstance(value, JobKey):
        return value.pk
    if is_dataclass(value) and not isinstance(value, type):
        plain = {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
        return {k: v for k, v in plain.items() if k not in ADDED_SINCE or v != ADDED_SINCE[k]}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, dict):
        return {k.pk if isinstance(k, JobKey) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """An item with its string sets sorted (DynamoDB keeps no order in a set)."""
    return {k: {"SS": sorted(v["SS"])} if "SS" in v else v for k, v in sorted(item.items())}


def _scenario(ledger: Ledger, books: Bookkeeping, clock: ManualClock) -> Iterator[Step]:
    """Every verb and read, in an order that writes every attribute of a row at least once."""

    def later(seconds: float, then: Callable[[], Any]) -> Callable[[], Any]:
        def step() -> Any:
            clock.advance(seconds)
            return then()

        return step

    def row(key: JobKey) -> Any:
        found = ledger.get(key)
        assert found is not None
        return found

    yield (
        "record",
        lambda: ledger.record(
            A, source="webhook", detail={"event": "extract_completed"}, delivery_id="d1"
        ),
    )
    yield "record again", lambda: ledger.record(A, source="job_list")
    yield "enqueue with evidence", later(0.125, lambda: ledger.enqueue(row(A), evidence="d2"))
    yield "enqueue replayed", lambda: ledger.enqueue(row(A), evidence="d2")
    yield "mark_enqueued", later(1.5, lambda: ledger.mark_enqueued(row(A)))
    yield "acquire", later(0.25, lambda: ledger.acquire(A, "w1", 60.0, source="sqs"))
    yield "acquire held", lambda: ledger.acquire(A, "w2", 60.0, source="sqs")
    yield (
        "checkpoint",
        lambda: ledger.checkpoint(
            A, "w1", next_page=2, stored=3, failed=1, page_seconds=1.25, next_item=4
        ),
    )
    yield (
        "release failed",
        later(
            2.0,
            lambda: ledger.release(
                A, "w1", error="boom" * 200, not_found=True, streak=Streak.FAILED
            ),
        ),
    )
    yield "acquire again", lambda: ledger.acquire(A, "w2", 60.0, source="sqs")
    yield "release answered", lambda: ledger.release(A, "w2", streak=Streak.ANSWERED)
    yield "acquire third", lambda: ledger.acquire(A, "w3", 60.0, source="sqs")
    yield "park", later(3.0, lambda: ledger.watch(A, "w3", not_found=True))
    yield "note_late_webhook", lambda: ledger.note_late_webhook(row(A))
    yield "note_late_webhook again", lambda: ledger.note_late_webhook(row(A))
    yield "wake", later(10.0, lambda: ledger.enqueue(row(A), evidence="d3"))
    yield "acquire woken", lambda: ledger.acquire(A, "w4", 60.0, source="watch")
    yield "watch", lambda: ledger.watch(A, "w4", job_created_at=1_799_999_000.5)
    yield "release lost", lambda: ledger.release(A, "w4")
    yield "acquire watched", later(5.0, lambda: ledger.acquire(A, "w5", 60.0, source="sqs"))
    yield "take over", later(61.0, lambda: ledger.acquire(A, "w6", 60.0, source="sqs"))
    yield (
        "finish dead",
        lambda: ledger.finish(
            A, "w6", Outcome.DEAD_LETTERED, {"reason": REASON_UNKNOWN_JOB, "record": "dl/a.json"}
        ),
    )
    closed = {}

    def reopen_and_unclaim() -> Any:
        before = row(A)
        written = ledger.reopened(before, evidence="d4")
        closed["before"] = before
        assert written is not None
        return written, ledger.unclaim(before, written), ledger.unclaim(before, written)

    yield "reopened then unclaimed", later(86_400.0, reopen_and_unclaim)
    yield "reopen", later(7.0, lambda: ledger.reopen(row(A), evidence="d5"))
    yield "reopen stale", lambda: ledger.reopen(closed["before"], evidence="d6")

    def wake_and_unclaim() -> Any:
        before = row(B)
        written = ledger.enqueue(before, evidence="w")
        assert written is not None
        return written, ledger.unclaim(before, written)

    yield (
        "record watching",
        lambda: ledger.record(
            B, source="watch", state=JobState.WATCHING, job_created_at=1_799_990_000.0
        ),
    )
    yield "woken then unclaimed", later(4.0, wake_and_unclaim)
    yield "record enqueued", lambda: ledger.record(C, source="job_list", state=JobState.ENQUEUED)
    yield "forget_unsent moved", lambda: ledger.forget_unsent(row(C))
    yield "record to forget", lambda: ledger.record(D, source="webhook")
    yield "forget_unsent", lambda: ledger.forget_unsent(row(D))
    yield "acquire unknown", lambda: ledger.acquire(D, "w7", 30.0, source="sqs")
    yield "finish stored", later(0.001, lambda: ledger.finish(D, "w7", Outcome.STORED))
    yield "finish lost", lambda: ledger.finish(D, "w7", Outcome.STORED)
    yield "record_chain", lambda: books.record_chain(B, 2)
    yield "record_chain again", lambda: books.record_chain(B, 5)
    yield "chain_depth", lambda: (books.chain_depth(B), books.chain_depth(A))
    yield "checkpoint write", lambda: books.write("watermark", {"at": "1800000000.5"})
    yield "checkpoint read", lambda: (books.read("watermark"), books.read("nothing"))
    yield "checkpoints read", lambda: books.read_many(["watermark", "nothing"])
    yield "get_many", lambda: ledger.get_many([A, B, C, D, JobKey(JobKind.BATCH, "none")])
    yield "pending", lambda: ledger.pending(JobState.WATCHING, since_before=clock.time() + 1)
    yield (
        "pending after",
        lambda: ledger.pending(
            JobState.ENQUEUED, since_before=clock.time() + 1, since_after=0.0, limit=1
        ),
    )
    yield "count_rows", ledger.count_rows
    yield "job_keys", lambda: sorted(k.pk for k in ledger.job_keys())


class _Calls:
    """DynamoDB calls by operation, counted as botocore makes them."""

    def __init__(self, client: Any) -> None:
        self.made: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.made[model.name] += 1

    def take(self) -> dict[str, int]:
        made, self.made = dict(self.made), Counter()
        return made


def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row tokens from a counter, so that two runs write the same bytes."""
    count = itertools.count()
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(count)))


def _returned(step: Callable[[], Any]) -> Any:
    """What ``step`` returned, or the lease it lost and the row it found."""
    try:
        return _plain(step())
    except LeaseLostError as lost:
        return {"raised": type(lost).__name__, "row": _plain(lost.row)}


def _run(client: Any) -> list[dict[str, Any]]:
    """The scenario against ``client``'s table: per step, what the golden file records."""
    clock = ManualClock(1_800_000_000.0)
    ledger = Ledger(TABLE, client=client, clock=clock)
    books = Bookkeeping(ledger)
    calls = _Calls(client)
    steps = []
    for name, step in _scenario(ledger, books, clock):
        calls.take()
        returned = _returned(step)
        made = calls.take()
        items = sorted(client.scan(TableName=TABLE)["Items"], key=lambda i: i["pk"]["S"])
        rows = {
            i["pk"]["S"]: _plain(ledger.get(JobKey.from_pk(i["pk"]["S"])))
            for i in items
            if i["pk"]["S"].split("#")[0] in set(JobKind)
        }
        steps.append(
            {
                "step": name,
                "calls": made,
                "returned": returned,
                "items": [_item(i) for i in items],
                "rows": rows,
            }
        )
    return steps


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    _tokens(monkeypatch)
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        create_ledger_table(dynamodb, TABLE)
        yield dynamodb


def _golden() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = json.loads(GOLDEN.read_text())
    return steps


def _without_ttl(returned: Any, *, pushed: bool) -> Any:
    """``returned`` with its rows' TTL left out (``pushed``: once checked as its last write's)."""
    if isinstance(returned, list):
        return [_without_ttl(value, pushed=pushed) for value in returned]
    if not isinstance(returned, dict) or "expires_at" not in returned:
        return returned
    assert not pushed or returned["expires_at"] == int(returned["state_since"]) + TTL_SECONDS
    return {k: v for k, v in returned.items() if k != "expires_at"}


def test_ledger_writes_and_returns_what_the_single_module_did_with_no_more_calls(client: Any):
    # GIVEN the scenario as the single-module ledger ran it
    golden = _golden()
    # WHEN it runs on this ledger
    steps = _run(client)
    # THEN each step leaves the same items, returns the same values, and calls DynamoDB no
    # more often, operation by operation
    assert [s["step"] for s in steps] == [g["step"] for g in golden]
    for step, was in zip(steps, golden, strict=True):
        assert step["items"] == was["items"], step["step"]
        if step["step"] in AS_WRITTEN:
            step["returned"] = _without_ttl(step["returned"], pushed=True)
            was["returned"] = _without_ttl(was["returned"], pushed=False)
        assert step["returned"] == was["returned"], step["step"]
        grew = {op: n for op, n in step["calls"].items() if n > was["calls"].get(op, 0)}
        assert grew == {}, (step["step"], step["calls"], was["calls"])


def test_ledger_reads_the_items_the_single_module_wrote_as_it_read_them(client: Any):
    # GIVEN each step's items as the single-module ledger wrote them, put back raw
    ledger = Ledger(TABLE, client=client, clock=ManualClock())
    for was in _golden():
        for item in was["items"]:
            client.put_item(TableName=TABLE, Item=item)
        # WHEN this ledger reads each job's row THEN it is the row the old code read
        for pk, row in was["rows"].items():
            assert _plain(ledger.get(JobKey.from_pk(pk))) == row, (was["step"], pk)


if __name__ == "__main__":  # capture: see the module docstring
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        from tests.conftest import OFFLINE_AWS_ENV

        for env, value in OFFLINE_AWS_ENV.items():
            mp.setenv(env, value)
        _tokens(mp)
        dynamodb = boto3.client("dynamodb")
        create_ledger_table(dynamodb, TABLE)
        GOLDEN.write_text(json.dumps(_run(dynamodb), indent=1, sort_keys=True) + "\n")
        sys.stdout.write(f"wrote {GOLDEN}\n")
