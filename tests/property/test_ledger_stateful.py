"""The ledger driven through random interleavings of its callers, against moto in-process.

A ``RuleBasedStateMachine`` plays the receiver (record, forget_unsent, mark_enqueued, reopen,
enqueue or reopened then maybe unclaim, note_late_webhook, each with a possibly stale snapshot),
several processors (acquire, release clean or with an error or a 404, watch, park, checkpoint,
finish with each outcome, catching ``LeaseLostError``), the reconciler (``Recoverer.ensure_many``
with a real ``JobQueue`` on moto SQS, ``Recoverer.watch_many``, ``pending`` queries) and the
clock (``ManualClock``; some advances beyond the lease) over a few job keys. After every step
the whole table is read (unless the step sent no request at all) and every row that changed is
checked against the runtime lifecycle table (``scrape_pipeline.ledger.lifecycle.MOVES``: a move of a
verb the step called must take a row from its old state to its new one) and the model's leases
and outcomes; whenever the table changed, its pending index is read and checked against it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from moto import mock_aws

from scrape_pipeline.jobs import JobKey, JobKind, JobState, Outcome, Source
from scrape_pipeline.ledger.attributes import PENDING_INDEX
from scrape_pipeline.ledger.leases import LeaseLostError
from scrape_pipeline.ledger.lifecycle import (
    ABSENT,
    DONE,
    ENQUEUED,
    MOVES,
    PROCESSING,
    RECEIVED,
    WATCHING,
    RowState,
    Verb,
)
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.processor.bulk_send import BulkSender
from scrape_pipeline.reconciler.recovery import Recoverer, RecoverySettings
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.create import create_ledger_table, create_queues
from tests.conftest import OFFLINE_AWS_ENV
from tests.property.conftest import examples
from tests.support.ledger import Ledger, allows

LEASE_SECONDS = 60.0
STALE_AFTER_SECONDS = 900.0
KEYS = (JobKey(JobKind.EXTRACT, "a"), JobKey(JobKind.BATCH, "a"), JobKey(JobKind.EXTRACT, "b"))
OWNERS = ("w1", "w2", "w3")
# Clock steps: none, small, up to and exactly the lease, beyond it, beyond the staleness bound.
ADVANCES = (0.0, 0.5, 1.0, 30.0, 59.0, 60.0, 61.0, 121.0, 901.0, 3600.0)
DETAILS: tuple[dict[str, str], ...] = (
    {},
    {"prefix": "extract/a/"},
    {"reason": "unknown job", "status": "404"},
)

REOPENABLE = frozenset({"unknown job", "never settled"})
# The Ledger methods that write, by the verb of the lifecycle table each makes (two verbs have
# a second entry point); the spy below notes which of them a step called.
WRITERS: dict[str, Verb] = {verb.value: verb for verb in Verb} | {
    "mark_enqueued": Verb.ENQUEUE,
    "reopened": Verb.REOPEN,
}


def _s(item: dict[str, Any] | None, name: str) -> str | None:
    value = (item or {}).get(name)
    return value["S"] if value and "S" in value else None


def _n(item: dict[str, Any] | None, name: str) -> float | None:
    value = (item or {}).get(name)
    return float(value["N"]) if value and "N" in value else None


def _struck(item: dict[str, Any] | None) -> set[str]:
    """The lease owners whose attempts hold a strike (``struck_by``, a string set)."""
    return set(((item or {}).get("struck_by") or {}).get("SS", []))


def _state(item: dict[str, Any] | None) -> RowState:
    return ABSENT if item is None else JobState(_s(item, "state") or "")


def _detail(item: dict[str, Any]) -> dict[str, str]:
    return {k: v["S"] for k, v in item.get("detail", {}).get("M", {}).items()}


def _reopenable(item: dict[str, Any] | None) -> bool:
    return (
        _state(item) == DONE
        and _s(item, "outcome") == Outcome.DEAD_LETTERED.value
        and _detail(item or {}).get("reason") in REOPENABLE
    )


class SpyLedger(Ledger):
    """A real ledger that notes which verbs of the lifecycle table were called (``called``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.called: set[Verb] = set()
        for name, verb in WRITERS.items():
            setattr(self, name, self._noting(getattr(self, name), verb))

    def _noting(self, method: Any, verb: Verb) -> Any:
        def noted(*args: Any, **kwargs: Any) -> Any:
            self.called.add(verb)
            return method(*args, **kwargs)

        return noted


@dataclass
class Step:
    """The operation the last rule performed, what it reported, and the time it ran at."""

    name: str
    key: JobKey | None = None
    now: float = 0.0
    wrote: bool = False  # the operation reported a write (changed rows must have one)
    owner: str | None = None
    outcome: Outcome | None = None
    detail: dict[str, str] = field(default_factory=dict)
    snapshot: LedgerRow | None = None
    calls_aws: bool = True  # False: the step made no request, so the table cannot have changed


@dataclass
class Aws:
    """moto clients, the table and the queue shared by every example of one test.

    Each example starts from an empty table and queue (``teardown`` empties them): creating
    them anew per example would cost more than the example.
    """

    dynamodb: Any
    sqs: Any
    table: str
    queue_url: str


class LedgerMachine(RuleBasedStateMachine):
    """Receiver, processors, reconciler and clock interleaved over the ledger."""

    # Snapshots callers hold on to: the receiver's own rows (from record); any row read at some
    # point, in any state (what mark_enqueued is handed: the receiver hands it RECEIVED rows only,
    # but the ledger must refuse to move any other whatever it is given); rows the reconciler
    # read (any state but DONE: what Recoverer.ensure_many is given).
    recorded = Bundle("recorded")
    snapshots = Bundle("snapshots")
    read = Bundle("read")
    # (key, owner) of every lease ever granted: processors finish or release what they were
    # granted, whether or not they still hold it by then.
    leases = Bundle("leases")
    # (the row before, the row written, the outcomes a reopen cleared) of every enqueue or
    # reopen whose message may yet fail to be sent: the sender then unclaims it.
    claims = Bundle("claims")

    def __init__(self, aws: Aws) -> None:
        super().__init__()
        self.aws = aws
        self.clock = ManualClock()
        self.table = aws.table
        self.queue_url = aws.queue_url
        self.ledger = SpyLedger(self.table, client=aws.dynamodb, clock=self.clock)
        self.recoverer = Recoverer(
            self.ledger,
            BulkSender(self.queue_url, client=aws.sqs),
            RecoverySettings(stale_after_seconds=STALE_AFTER_SECONDS),
            clock=self.clock,
        )
        self.items: dict[str, dict[str, Any]] = {}  # pk -> the item as last checked
        self.step: Step | None = None
        self.holders: dict[JobKey, dict[str, float]] = {k: {} for k in KEYS}  # owner -> until
        self.outcomes: dict[JobKey, list[tuple[Outcome, dict[str, str]]]] = {k: [] for k in KEYS}

    def teardown(self) -> None:
        """Leave the table and the queue empty for the next example."""
        items = self.aws.dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        for item in items:
            self.aws.dynamodb.delete_item(TableName=self.table, Key={"pk": item["pk"]})
        self.sent()

    # -- helpers ---------------------------------------------------------------------------

    def before(self, key: JobKey) -> dict[str, Any] | None:
        """The key's item as the last check saw it (nothing else writes in between)."""
        return self.items.get(key.pk)

    def begin(self, name: str, key: JobKey | None = None, **kwargs: Any) -> Step:
        self.ledger.called.clear()
        self.step = Step(name, key, self.clock.time(), **kwargs)
        return self.step

    def sent(self) -> list[dict[str, Any]]:
        """Messages the reconciler sent since the last look (received and deleted)."""
        out: list[dict[str, Any]] = []
        while True:
            got = self.aws.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            ).get("Messages", [])
            if not got:
                return out
            for message in got:
                out.append(json.loads(message["Body"]))
                self.aws.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    @staticmethod
    def same_row(row: LedgerRow | None, item: dict[str, Any] | None) -> bool:
        """A row returned by the ledger describes ``item`` (state, since, lease, token)."""
        if row is None or item is None:
            return row is None and item is None
        return (
            row.key.pk == _s(item, "pk")
            and row.state.value == _state(item)
            and row.state_since == _n(item, "state_since")
            and row.lease_owner == _s(item, "lease_owner")
            and row.lease_until == _n(item, "lease_until")
            and row.token == _s(item, "token")
        )

    # -- the clock -------------------------------------------------------------------------

    @rule(seconds=st.sampled_from(ADVANCES))
    def advance_clock(self, seconds: float) -> None:
        self.begin("advance", calls_aws=False)
        self.clock.advance(seconds)

    # -- receiver --------------------------------------------------------------------------

    @rule(targets=(recorded, snapshots), key=st.sampled_from(KEYS))
    def receiver_record(self, key: JobKey) -> LedgerRow:
        """The receiver records a delivery's job and keeps the row it got back (its own, or the
        one a duplicate found) as a snapshot, stale soon after."""
        before = self.before(key)
        step = self.begin("record", key)
        result = self.ledger.record(key, source="webhook", detail={"event": "extract_completed"})
        step.wrote = result.created
        assert result.created == (before is None), "record creates exactly when no row exists"
        if before is not None:
            assert self.same_row(result.row, before), "a duplicate gets the existing row back"
        return result.row

    @rule(row=recorded)
    def receiver_forget_unsent(self, row: LedgerRow) -> None:
        before = self.before(row.key)
        step = self.begin("forget_unsent", row.key, snapshot=row)
        deleted = self.ledger.forget_unsent(row)
        step.wrote = deleted
        own_received = _state(before) == RECEIVED and _s(before, "token") == row.token
        assert deleted == own_received, "forget_unsent deletes exactly its own RECEIVED row"

    # ``returning``: the receiver's own call, which returns the row written (a claim the sender
    # may have to undo), rather than whether it moved.
    @rule(target=claims, row=snapshots, returning=st.booleans())
    def receiver_mark_enqueued(self, row: LedgerRow, returning: bool) -> Any:
        """Re-enqueue from a snapshot that may be stale, and of any state."""
        before = self.before(row.key)
        step = self.begin("mark_enqueued", row.key, snapshot=row)
        written = self.ledger.enqueue(row) if returning else None
        moved = written is not None if returning else self.ledger.mark_enqueued(row)
        step.wrote = moved
        unmoved = _state(before) == row.state.value and _n(before, "state_since") == row.state_since
        waiting = _state(before) in (RECEIVED, ENQUEUED, WATCHING)
        assert moved == (unmoved and waiting), (
            "mark_enqueued wins exactly when a RECEIVED/ENQUEUED/WATCHING row is as the snapshot"
        )
        return (row, written, []) if written is not None else multiple()

    @rule(target=claims, row=snapshots, returning=st.booleans())
    def receiver_reopen(self, row: LedgerRow, returning: bool) -> Any:
        """A terminal event reopens a row closed as unknown, from a snapshot that may be stale."""
        before = self.before(row.key)
        step = self.begin("reopen", row.key, snapshot=row)
        written = self.ledger.reopened(row) if returning else None
        reopened = written is not None if returning else self.ledger.reopen(row)
        step.wrote = reopened
        current = _state(before) == row.state.value and _n(before, "finished_at") == row.finished_at
        assert reopened == (current and _reopenable(before)), (
            "reopen wins exactly when a reopenable DONE row is as the snapshot"
        )
        if not reopened:
            return multiple()
        cleared = list(self.outcomes[row.key])
        self.outcomes[row.key].clear()
        return (row, written, cleared) if written is not None else multiple()

    @rule(claim=consumes(claims))
    def sender_unclaim(self, claim: tuple[LedgerRow, LedgerRow, list[Any]]) -> None:
        """A claim's message could not be sent: the row goes back, if it is still as written."""
        row, written, cleared = claim
        before = self.before(row.key)
        step = self.begin("unclaim", row.key, snapshot=row)
        undone = self.ledger.unclaim(row, written)
        step.wrote = undone
        as_written = _state(before) == ENQUEUED and _n(before, "state_since") == written.state_since
        assert undone == as_written, "unclaim wins exactly when the row is as the claim wrote it"
        if undone and row.is_done:
            self.outcomes[row.key] = cleared  # the reopen undone: its close stands again

    @rule(row=snapshots)
    def receiver_note_late_webhook(self, row: LedgerRow) -> None:
        """A webhook for a job the reconciler recovered first: marked once, in any state."""
        before = self.before(row.key)
        step = self.begin("note_late_webhook", row.key, snapshot=row)
        noted = self.ledger.note_late_webhook(row)
        step.wrote = noted
        assert noted == (before is not None and "late_webhook_at" not in before)

    # -- processors ------------------------------------------------------------------------

    @rule(target=leases, key=st.sampled_from(KEYS), owner=st.sampled_from(OWNERS))
    def processor_acquire(self, key: JobKey, owner: str) -> Any:
        before = self.before(key)
        step = self.begin("acquire", key, owner=owner)
        now = step.now
        result = self.ledger.acquire(key, owner, LEASE_SECONDS, source="sqs")
        step.wrote = result.granted
        state = _state(before)
        free = state in (ABSENT, RECEIVED, ENQUEUED, WATCHING) or (
            state == PROCESSING and (_n(before, "lease_until") or 0.0) < now
        )
        assert result.granted == free, f"acquire from {state} at {now}: granted={result.granted}"
        if result.granted:
            assert result.row is not None
            assert result.row.lease_owner == owner
            assert result.row.lease_until == now + LEASE_SECONDS
            assert result.row.attempts == int(_n(before, "attempts") or 0) + 1
            assert result.row.strikes == len(_struck(before) | {owner})  # until it ends cleanly
            self.holders[key][owner] = now + LEASE_SECONDS
            return (key, owner)
        assert self.same_row(result.row, before), "a refused lease shows the row as it is"
        return multiple()

    def _leased(
        self,
        name: str,
        key: JobKey,
        owner: str,
        call: Any,
        keeps_lease: bool = False,
        **kwargs: Any,
    ) -> LedgerRow | None:
        before = self.before(key)
        step = self.begin(name, key, owner=owner, **kwargs)
        holds = _state(before) == PROCESSING and _s(before, "lease_owner") == owner
        try:
            row: LedgerRow = call()
        except LeaseLostError as lost:
            assert not holds, f"{name} by the lease holder {owner} was refused"
            assert self.same_row(lost.row, before), "LeaseLostError carries the row as it is"
            self.holders[key].pop(owner, None)
            return None
        step.wrote = True
        assert holds, f"{name} by {owner}, who does not hold the lease, succeeded"
        if not keeps_lease:
            self.holders[key].pop(owner, None)
        return row

    @rule(lease=leases, how=st.sampled_from(["clean", "error", "not_found"]))
    def processor_release(self, lease: tuple[JobKey, str], how: str) -> None:
        key, owner = lease
        before = self.before(key)
        error = "ValueError: poison" if how == "error" else None
        row = self._leased(
            "release",
            key,
            owner,
            lambda: self.ledger.release(key, owner, error=error, not_found=how == "not_found"),
        )
        if row is not None:
            assert row.state is JobState.ENQUEUED and row.lease_owner is None
            # A clean release takes the attempt's strike back (if a checkpoint did not already);
            # a failed one keeps it.
            struck = _struck(before)
            assert row.strikes == len(struck if error else struck - {owner})
            assert row.not_found == int(_n(before, "not_found") or 0) + (how == "not_found")
            if error:
                assert row.last_error == error

    @rule(lease=leases)
    def processor_watch(self, lease: tuple[JobKey, str]) -> None:
        key, owner = lease
        call = lambda: self.ledger.watch(key, owner, job_created_at=1.0)  # noqa: E731
        before = self.before(key)
        row = self._leased("watch", key, owner, call)
        if row is not None:
            assert row.state is JobState.WATCHING and row.lease_owner is None
            assert row.strikes == len(_struck(before) - {owner})

    @rule(lease=leases, not_found=st.booleans())
    def processor_park(self, lease: tuple[JobKey, str], not_found: bool) -> None:
        key, owner = lease
        call = lambda: self.ledger.watch(key, owner, not_found=not_found)  # noqa: E731
        before = self.before(key)
        row = self._leased("park", key, owner, call)
        if row is not None:
            assert row.state is JobState.WATCHING and row.lease_owner is None
            assert row.strikes == len(_struck(before) - {owner})
            assert row.failures == int(_n(before, "failures") or 0) + 1

    @rule(lease=leases, page=st.integers(min_value=2, max_value=5))
    def processor_checkpoint(self, lease: tuple[JobKey, str], page: int) -> None:
        key, owner = lease
        call = lambda: self.ledger.checkpoint(key, owner, next_page=page, stored=page, failed=0)  # noqa: E731
        row = self._leased("checkpoint", key, owner, call, keeps_lease=True)
        if row is not None:
            assert row.state is JobState.PROCESSING and row.next_page == page
            # Progress: the strikes so far are cleared, this attempt's and earlier ones.
            assert row.strikes == 0

    @rule(lease=leases, outcome=st.sampled_from(Outcome), detail=st.sampled_from(DETAILS))
    def processor_finish(
        self, lease: tuple[JobKey, str], outcome: Outcome, detail: dict[str, str]
    ) -> None:
        self._finish(lease, outcome, detail)

    @rule(target=snapshots, lease=leases)
    def processor_close_unknown(self, lease: tuple[JobKey, str]) -> Any:
        """The processor closes a job the API does not know: a close that evidence reopens
        (drawn apart from ``processor_finish``, where it is one closing in a dozen)."""
        row = self._finish(lease, Outcome.DEAD_LETTERED, DETAILS[-1])
        return multiple() if row is None else row

    def _finish(
        self, lease: tuple[JobKey, str], outcome: Outcome, detail: dict[str, str]
    ) -> LedgerRow | None:
        key, owner = lease
        row = self._leased(
            "finish",
            key,
            owner,
            lambda: self.ledger.finish(key, owner, outcome, detail),
            outcome=outcome,
            detail=dict(detail),
        )
        if row is not None:
            self.outcomes[key].append((outcome, dict(detail)))
            assert row.state is JobState.DONE and row.outcome is outcome and row.detail == detail
        return row

    # -- reconciler ------------------------------------------------------------------------

    def _ensure(self, key: JobKey, row: LedgerRow | None, *, fresh: bool) -> None:
        before = self.before(key)
        step = self.begin("ensure", key, snapshot=row)
        now = step.now
        rows = {key: row} if row is not None else {}
        enqueued = bool(self.recoverer.ensure_many([key], rows, source="reconciler"))
        step.wrote = enqueued
        if enqueued and _state(before) == DONE:
            self.outcomes[key].clear()  # reopened: the next outcome is its one outcome
        messages = self.sent()
        expected_message = {"kind": key.kind.value, "job_id": key.job_id, "source": "reconciler"}
        assert messages == [expected_message] * enqueued, "True exactly when one message went"
        if fresh:
            # Given the row as it is now, the reconciler's decision is fully determined.
            state = _state(before)
            if state == ABSENT:
                needed = True
            elif state == DONE:
                needed = _reopenable(before)
            elif state == WATCHING:
                # The caller found it settled: wake it, unless it was parked for its failing
                # calls (the watch sweep polls those on their own schedule).
                needed = _n(before, "failing_since") is None
            elif state == PROCESSING:
                needed = (_n(before, "lease_until") or 0.0) < now
            else:
                needed = (_n(before, "state_since") or 0.0) < now - STALE_AFTER_SECONDS
            assert enqueued == needed, f"ensure on a fresh {state} row at {now}: {enqueued}"

    # One time in three the job comes from the job list alone (no row read).
    @rule(target=read, key=st.sampled_from(KEYS), listed_only=st.sampled_from([False, False, True]))
    def reconciler_ensure(self, key: JobKey, listed_only: bool) -> Any:
        """The reconciler makes sure of a job: one it read the row of just now, or one the job
        list names and it found no row for (maybe one appeared since)."""
        if listed_only:
            self._ensure(key, None, fresh=False)
            return multiple()
        row = self.ledger.get(key)
        self._ensure(key, row, fresh=True)
        return multiple() if row is None or row.is_done else row

    @rule(key=st.sampled_from(KEYS))
    def reconciler_watch_many(self, key: JobKey) -> None:
        """The job list names the job unsettled: recorded WATCHING, unless it has a row."""
        before = self.before(key)
        step = self.begin("watch_many", key)
        created = self.recoverer.watch_many({key: 1.0}, source=Source.WATCH)
        step.wrote = created == 1
        assert created == (before is None), "watch_many creates exactly when no row exists"

    @rule(row=consumes(read))
    def reconciler_ensure_stale(self, row: LedgerRow) -> None:
        """The reconciler acts on a row it read a while ago (a page of the pending index)."""
        self._ensure(row.key, row, fresh=False)

    @rule(
        target=read,
        state=st.sampled_from([RECEIVED, ENQUEUED, PROCESSING, WATCHING]),
        age=st.sampled_from([0.0, 60.0, STALE_AFTER_SECONDS]),
    )
    def reconciler_pending(self, state: str, age: float) -> Any:
        step = self.begin("pending")
        before = step.now - age
        rows, cursor = self.ledger.pending(JobState(state), since_before=before, limit=100)
        assert cursor is None, "one page holds every row of this small table"
        expected = {
            pk
            for pk, item in self.items.items()
            if _state(item) == state and (_n(item, "state_since") or 0.0) < before
        }
        assert {r.key.pk for r in rows} == expected, "pending lists exactly the stuck rows"
        assert [r.state_since for r in rows] == sorted(r.state_since for r in rows), "oldest first"
        for r in rows:
            assert self.same_row(r, self.items[r.key.pk])
        return multiple(*rows)

    @rule(target=snapshots, key=st.sampled_from(KEYS))
    def read_row(self, key: JobKey) -> Any:
        """Someone reads a row and keeps it: a snapshot, stale soon after."""
        self.begin("get")
        row = self.ledger.get(key)
        assert self.same_row(row, self.before(key))
        return multiple() if row is None else row

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def ledger_moves_only_as_allowed(self) -> None:
        """Read the table and its index; check every change against MOVES and the model."""
        now = self.clock.time()
        step = self.step or Step("init")
        if step.calls_aws:
            scan = self.aws.dynamodb.scan(TableName=self.table, ConsistentRead=True)
            items = {i["pk"]["S"]: i for i in scan["Items"]}
        else:
            items = self.items  # the step sent no request: the table is as last read
        assert set(items) <= {k.pk for k in KEYS}, f"unexpected rows {set(items)}"
        for key in KEYS:
            self._check_transition(step, key, self.items.get(key.pk), items.get(key.pk))
        if items != self.items or step.name == "init":
            # The index follows the table: unchanged rows were checked against it already.
            self._check_index(items)
        self._check_leases(items, now)
        self._check_outcomes(items)
        self.items = items
        self.step = None

    def _check_transition(
        self, step: Step, key: JobKey, before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> None:
        if before == after:
            return
        move = (_state(before), _state(after))
        where = f"{key.pk}: {move[0].value} -> {move[1].value} by {step.name}"
        event(where.partition(": ")[2])  # --hypothesis-show-statistics
        assert step.key == key, f"{where}, an operation on {step.key}"
        called = sorted(verb.value for verb in self.ledger.called)
        explained = [m for m in MOVES if m.verb in called and allows(m, *move)]
        assert explained, f"{where}: no move of the lifecycle table by {called} does this"
        assert step.wrote, f"{where}, which reported no write"
        if before is not None and after is not None:
            for name in ("created_at", "source", "token", "kind", "job_id"):
                assert before.get(name) == after.get(name), f"{where} changed {name}"
        if move == (RECEIVED, ABSENT):
            assert step.snapshot is not None and step.snapshot.token == _s(before, "token")
        if step.name == "acquire":
            assert _s(after, "lease_owner") == step.owner
            if move[0] == PROCESSING:
                until = _n(before, "lease_until") or 0.0
                assert until < step.now, f"{where}: the lease (until {until}) was live"
        if move == (DONE, DONE):
            assert before is not None and after is not None
            changed = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
            assert changed <= {"late_webhook_at", "updated_at", "expires_at"}, f"{where}: {changed}"
        elif move[0] == DONE:
            assert _reopenable(before), f"{where}: left DONE from a close that is final"
            assert _detail(after or {}).get("reopened") == _detail(before or {}).get("reason")
        if step.name in ("release", "finish", "watch", "park", "checkpoint"):
            assert _s(before, "lease_owner") == step.owner, f"{where}, not by the holder"
        if step.name == "finish":
            assert after is not None
            assert _s(after, "outcome") == (step.outcome and step.outcome.value)
            assert _detail(after) == step.detail
        if step.name == "mark_enqueued":
            snapshot = step.snapshot
            assert snapshot is not None
            assert (move[0], _n(before, "state_since")) == (
                snapshot.state.value,
                snapshot.state_since,
            ), f"{where} from a snapshot that no longer matched"

    def _check_index(self, items: dict[str, dict[str, Any]]) -> None:
        """Rows not DONE are exactly those in the pending index, with their state."""
        indexed = {
            i["pk"]["S"]: (_s(i, "pending_state"), _n(i, "state_since"))
            for i in self.aws.dynamodb.scan(TableName=self.table, IndexName=PENDING_INDEX)["Items"]
        }
        expected = {
            pk: (_state(item), _n(item, "state_since"))
            for pk, item in items.items()
            if _state(item) != DONE
        }
        assert indexed == expected, f"pending index {indexed} != rows not DONE {expected}"
        for pk, item in items.items():
            if _state(item) == DONE:
                assert "pending_state" not in item, f"{pk} is DONE but still pending"

    def _check_leases(self, items: dict[str, dict[str, Any]], now: float) -> None:
        """At most one owner holds a live lease, and the row names it; leases only PROCESSING."""
        for key in KEYS:
            item = items.get(key.pk)
            live = {o for o, until in self.holders[key].items() if until >= now}
            assert len(live) <= 1, f"{key.pk}: live leases held by {sorted(live)}"
            if live:
                assert _state(item) == PROCESSING and _s(item, "lease_owner") in live
            if item is not None:
                has_lease = "lease_owner" in item or "lease_until" in item
                assert has_lease == (_state(item) == PROCESSING), f"{key.pk}: lease vs state"

    def _check_outcomes(self, items: dict[str, dict[str, Any]]) -> None:
        """Each job reaches at most one outcome; a DONE row shows that one."""
        for key in KEYS:
            finished = self.outcomes[key]
            assert len(finished) <= 1, f"{key.pk} finished {len(finished)} times: {finished}"
            item = items.get(key.pk)
            if _state(item) == DONE:
                assert item is not None and finished
                outcome, detail = finished[0]
                assert _s(item, "outcome") == outcome.value and _detail(item) == detail
            else:
                assert not finished, f"{key.pk} finished but is {_state(item)}"


@pytest.fixture
def aws() -> Iterator[Aws]:
    """moto in-process for the whole state-machine run: one table and queue, emptied after each
    example by the machine's teardown."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        sqs = boto3.client("sqs")
        queue_url, _ = create_queues(sqs, "jobs")
        yield Aws(dynamodb, sqs, create_ledger_table(dynamodb, "ledger"), queue_url)


# A failing run spends minutes shrinking 30-step examples against moto; the suite's 120 s
# timeout would cut that short and show a timeout instead of the minimal example.
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "slow",
    [pytest.param(False, id="suite"), pytest.param(True, id="thorough", marks=pytest.mark.slow)],
)
def test_ledger_random_interleavings_keep_transitions_and_invariants(aws: Aws, slow: bool):
    """Random interleavings of receiver, processor, reconciler steps and clock advances: every
    observed transition is a move of the lifecycle table by a verb the step called; DONE rows
    change only when a reopenable close is reopened; one outcome per job since its last reopen;
    forget_unsent deletes only its own RECEIVED row;
    at most one live lease holder; rows not DONE are exactly the pending index, with their
    state; each operation's return value agrees with the row it acted on."""

    class Machine(LedgerMachine):
        def __init__(self) -> None:
            super().__init__(aws)

    run_state_machine_as_test(
        Machine,
        settings=settings(max_examples=examples(40, slow=slow), stateful_step_count=50),
    )


# --- mark_enqueued outside the states it is documented for --------------------------------------


@pytest.fixture(scope="module")
def ledger_table() -> Iterator[tuple[Any, str]]:
    """moto in-process with one ledger table, shared by the examples of the test below."""
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        for name, value in OFFLINE_AWS_ENV.items():
            mp.setenv(name, value)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)  # in-process moto, whatever ran before
        dynamodb = boto3.client("dynamodb")
        yield dynamodb, create_ledger_table(dynamodb, "ledger-snapshots")


@settings(max_examples=20)
@given(
    outcome=st.sampled_from([None, *Outcome]),
    advance=st.sampled_from([0.0, LEASE_SECONDS, LEASE_SECONDS + 1]),
)
def test_ledger_mark_enqueued_never_moves_a_leased_or_done_row(
    ledger_table: tuple[Any, str], outcome: Outcome | None, advance: float
):
    """mark_enqueued is documented to move "a RECEIVED or ENQUEUED row": given the snapshot of
    a PROCESSING row (lease live or expired) or of a DONE row (any outcome), even one that is
    still current, it must refuse and leave the row exactly as it was. Otherwise a DONE job
    leaves DONE, the one thing the ledger promises never happens."""
    dynamodb, table = ledger_table
    clock = ManualClock()
    ledger = Ledger(table, client=dynamodb, clock=clock)
    key = KEYS[0]
    dynamodb.delete_item(TableName=table, Key={"pk": {"S": key.pk}})
    ledger.record(key, source="webhook")
    assert ledger.acquire(key, "w1", LEASE_SECONDS, source="sqs").granted
    if outcome is not None:
        ledger.finish(key, "w1", outcome)
    clock.advance(advance)
    row = ledger.get(key)
    assert row is not None and row.state in (JobState.PROCESSING, JobState.DONE)

    moved = ledger.mark_enqueued(row)

    after = ledger.get(key)
    assert not moved, f"mark_enqueued moved a {row.state.value} row to {after and after.state}"
    assert after == row
