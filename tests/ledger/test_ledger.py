"""The ledger's state machine over DynamoDB conditional writes (moto; fake clock)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import boto3
import httpx
import pytest
from moto import mock_aws

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.jobs import JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.leases import LeaseLostError, Streak
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import DEFAULT_MAX_REOPENS
from scrape_pipeline_local.clock import ManualClock
from tests.support.ledger import Ledger
from tests.support.template import create_ledger_table, moto_server

KEY = JobKey(JobKind.EXTRACT, "job-1")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ledger(clock: ManualClock) -> Iterator[Ledger]:
    with mock_aws():
        client = boto3.client("dynamodb")
        create_ledger_table(client, "ledger")
        yield Ledger("ledger", client=client, clock=clock)


def test_ledger_record_creates_once(ledger: Ledger):
    first = ledger.record(KEY, source="webhook", detail={"event": "extract_completed"})
    second = ledger.record(KEY, source="reconciler")

    assert first.created and not second.created
    assert second.row.state is JobState.RECEIVED
    assert second.row.source == "webhook"  # the old row, untouched
    assert second.row.detail == {"event": "extract_completed"}
    assert second.row.token == first.row.token


def test_ledger_key_is_per_kind(ledger: Ledger):
    assert ledger.record(JobKey(JobKind.BATCH, "x"), source="s").created
    assert ledger.record(JobKey(JobKind.CRAWL, "x"), source="s").created
    assert JobKey.from_pk("crawl#x") == JobKey(JobKind.CRAWL, "x")


def test_ledger_acquire_is_exclusive_until_lease_expires(ledger: Ledger, clock: ManualClock):
    ledger.record(KEY, source="webhook")
    first = ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    busy = ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")
    clock.advance(61)
    taken_over = ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")

    assert first.granted and first.row is not None and first.row.attempts == 1
    assert not busy.granted and busy.row is not None and busy.row.lease_owner == "w1"
    assert taken_over.granted and taken_over.row is not None
    assert taken_over.row.lease_owner == "w2" and taken_over.row.attempts == 2
    # the first holder's lease is gone: it can no longer finish the job
    with pytest.raises(LeaseLostError) as info:
        ledger.finish(KEY, "w1", Outcome.STORED)
    assert info.value.row is not None and info.value.row.lease_owner == "w2"


def test_ledger_acquire_creates_row_for_unknown_job(ledger: Ledger):
    result = ledger.acquire(KEY, "w1", lease_seconds=60, source="reconciler:job_list")
    assert result.granted and result.row is not None
    assert result.row.state is JobState.PROCESSING and result.row.source == "reconciler:job_list"
    row = ledger.get(KEY)
    assert row is not None and row.created_at > 0


def test_ledger_finish_is_final(ledger: Ledger, clock: ManualClock):
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    done = ledger.finish(KEY, "w1", Outcome.STORED, {"s3_key": "results/extract/job-1"})
    clock.advance(3600)
    again = ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")

    assert done.is_done and done.outcome is Outcome.STORED and done.lease_owner is None
    assert done.detail == {"s3_key": "results/extract/job-1"}
    assert not again.granted and again.row is not None and again.row.is_done
    assert ledger.record(KEY, source="webhook").created is False


def test_ledger_release_returns_job_to_enqueued(ledger: Ledger):
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    row = ledger.release(KEY, "w1")
    assert row.state is JobState.ENQUEUED and row.releases == 1 and row.lease_owner is None
    assert ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs").granted
    with pytest.raises(LeaseLostError):
        ledger.release(KEY, "w1")


def test_ledger_pending_finds_stale_rows_not_done_ones(ledger: Ledger, clock: ManualClock):
    keys = [JobKey(JobKind.EXTRACT, f"j{i}") for i in range(5)]
    for key in keys:
        ledger.record(key, source="webhook")
        clock.advance(10)
    ledger.acquire(keys[0], "w", lease_seconds=5, source="sqs")
    ledger.finish(keys[0], "w", Outcome.STORED)

    stale, _ = ledger.pending(JobState.RECEIVED, since_before=clock.time() - 15)
    processing, _ = ledger.pending(JobState.PROCESSING, since_before=clock.time() + 1)

    assert [r.key.job_id for r in stale] == ["j1", "j2", "j3"]  # oldest first, j4 too fresh
    assert processing == []  # DONE rows left the index


def test_ledger_pending_pages_with_cursor(ledger: Ledger, clock: ManualClock):
    for i in range(7):
        ledger.record(JobKey(JobKind.EXTRACT, f"p{i}"), source="s")
        clock.advance(1)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        rows, cursor = ledger.pending(
            JobState.RECEIVED, since_before=clock.time(), limit=3, cursor=cursor
        )
        seen.extend(r.key.job_id for r in rows)
        if cursor is None:
            break
    assert seen == [f"p{i}" for i in range(7)]


def test_ledger_pending_lists_no_done_row(ledger: Ledger, clock: ManualClock):
    ledger.acquire(KEY, "w", lease_seconds=5, source="sqs")
    ledger.finish(KEY, "w", Outcome.STORED)
    assert ledger.pending(JobState.DONE, since_before=clock.time() + 1) == ([], None)


def test_ledger_forget_unsent_only_own_received_row(ledger: Ledger):
    mine = ledger.record(KEY, source="webhook").row
    impostor = ledger.record(JobKey(JobKind.EXTRACT, "other"), source="webhook").row
    assert ledger.forget_unsent(impostor.__class__(**{**impostor.__dict__, "key": KEY})) is False
    assert ledger.forget_unsent(mine) is True
    assert ledger.get(KEY) is None


def test_ledger_forget_unsent_refuses_once_processing(ledger: Ledger):
    row = ledger.record(KEY, source="webhook").row
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    assert ledger.forget_unsent(row) is False
    assert ledger.get(KEY) is not None


def test_ledger_mark_enqueued_has_one_winner(ledger: Ledger, clock: ManualClock):
    snapshot = ledger.record(KEY, source="webhook").row
    clock.advance(5)
    assert ledger.mark_enqueued(snapshot) is True
    assert ledger.mark_enqueued(snapshot) is False  # a concurrent re-enqueuer with the same view
    row = ledger.get(KEY)
    assert row is not None and row.state is JobState.ENQUEUED and row.state_since == clock.time()


def test_ledger_aws_failure_is_unavailable_error(clock: ManualClock):
    with mock_aws():
        ledger = Ledger("missing-table", client=boto3.client("dynamodb"), clock=clock)
        with pytest.raises(AWSUnavailableError) as info:
            ledger.record(KEY, source="webhook")
    assert info.value.code == "ResourceNotFoundException"


@pytest.mark.parametrize("state", [JobState.PROCESSING, JobState.DONE])
def test_ledger_record_rejects_later_states(ledger: Ledger, state: JobState):
    with pytest.raises(ValueError, match="RECEIVED, ENQUEUED or WATCHING"):
        ledger.record(KEY, source="s", state=state)
    assert ledger.get(KEY) is None


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server, endpoint = moto_server()
    yield endpoint
    server.stop()


def test_ledger_concurrent_records_create_exactly_one(moto_endpoint: str, clock: ManualClock):
    # GIVEN a real moto server (thread-safe, over HTTP) and 50 writers racing on one job
    httpx.post(f"{moto_endpoint}/moto-api/reset")
    client = boto3.client("dynamodb", endpoint_url=moto_endpoint)
    create_ledger_table(client, "race")
    ledger = Ledger("race", client=client, clock=clock)
    start = threading.Barrier(50)

    def write(_: int) -> bool:
        start.wait()
        return ledger.record(KEY, source="webhook").created

    with ThreadPoolExecutor(50) as pool:
        created = list(pool.map(write, range(50)))

    assert created.count(True) == 1
    assert len(client.scan(TableName="race")["Items"]) == 1


def test_ledger_concurrent_acquires_grant_one_lease(moto_endpoint: str, clock: ManualClock):
    httpx.post(f"{moto_endpoint}/moto-api/reset")
    client = boto3.client("dynamodb", endpoint_url=moto_endpoint)
    create_ledger_table(client, "race2")
    ledger = Ledger("race2", client=client, clock=clock)
    ledger.record(KEY, source="webhook")
    start = threading.Barrier(20)

    def take(i: int) -> bool:
        start.wait()
        return ledger.acquire(KEY, f"w{i}", lease_seconds=60, source="sqs").granted

    with ThreadPoolExecutor(20) as pool:
        granted = list(pool.map(take, range(20)))
    assert granted.count(True) == 1


# -- the long tail: strikes, 404s, watching, checkpoints, reopening, lifetime --------------------


def test_ledger_strikes_count_only_attempts_that_did_not_end_cleanly(
    ledger: Ledger, clock: ManualClock
):
    # GIVEN a clean release, a failed attempt, a 404 and an attempt that was killed
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    clean = ledger.release(KEY, "w1")
    ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")
    failed = ledger.release(KEY, "w2", error="KeyError: 'job_id'")
    ledger.acquire(KEY, "w3", lease_seconds=60, source="sqs")
    missing = ledger.release(KEY, "w3", not_found=True)
    ledger.acquire(KEY, "w4", lease_seconds=60, source="sqs")  # never released: killed
    clock.advance(61)
    retaken = ledger.acquire(KEY, "w5", lease_seconds=60, source="sqs")

    # THEN only the error and the killed attempt keep their strikes; 404s are counted apart
    assert clean.strikes == 0 and clean.last_error is None
    assert failed.strikes == 1 and failed.last_error == "KeyError: 'job_id'"
    assert missing.strikes == 1 and missing.not_found == 1
    assert retaken.row is not None
    assert retaken.row.strikes == 3 and retaken.row.attempts == 5 and retaken.row.not_found == 1


def test_ledger_watch_parks_a_job_until_woken(ledger: Ledger, clock: ManualClock):
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    parked = ledger.watch(KEY, "w1", job_created_at=0.0)
    clock.advance(3600)
    watched, _ = ledger.pending(JobState.WATCHING, since_before=clock.time())
    stuck, _ = ledger.pending(JobState.ENQUEUED, since_before=clock.time())

    assert parked.state is JobState.WATCHING and parked.lease_owner is None
    assert parked.strikes == 0  # a clean end of the attempt
    assert [r.key for r in watched] == [KEY] and stuck == []
    assert ledger.mark_enqueued(parked)  # woken (its webhook, or the reconciler)
    assert ledger.get(KEY).state is JobState.ENQUEUED  # type: ignore[union-attr]


def test_ledger_failed_calls_run_until_an_answer_and_park_keeps_counting(
    ledger: Ledger, clock: ManualClock
):
    # GIVEN two failed calls, a throttle between them, then a park
    ledger.record(KEY, source="webhook")
    began = clock.time()
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    first = ledger.release(KEY, "w1", streak=Streak.FAILED)
    clock.advance(30)
    ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")
    throttled = ledger.release(KEY, "w2")
    ledger.acquire(KEY, "w3", lease_seconds=60, source="sqs")
    second = ledger.release(KEY, "w3", streak=Streak.FAILED, not_found=True)
    ledger.acquire(KEY, "w4", lease_seconds=60, source="sqs")
    parked = ledger.watch(KEY, "w4", not_found=True)

    # THEN the run counts failures from its first one, a throttle neither adds nor ends it,
    # and the parked row is WATCHING, clean (no strike), still counting
    assert (first.failures, first.failing_since) == (1, began)
    assert (throttled.failures, throttled.failing_since) == (1, began)
    assert (second.failures, second.not_found) == (2, 1)
    assert parked.state is JobState.WATCHING and parked.lease_owner is None
    assert (parked.failures, parked.failing_since, parked.not_found) == (3, began, 2)
    assert parked.strikes == 0

    # WHEN it is woken and the API answers (the job still runs)
    assert ledger.mark_enqueued(parked)
    ledger.acquire(KEY, "w5", lease_seconds=60, source="watch")
    answered = ledger.release(KEY, "w5", streak=Streak.ANSWERED)
    # THEN the run is over
    assert (answered.failures, answered.failing_since) == (0, None)


def test_ledger_checkpoint_keeps_the_lease_and_records_progress(ledger: Ledger):
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    row = ledger.checkpoint(KEY, "w1", next_page=3, stored=98, failed=2)
    assert row.state is JobState.PROCESSING and row.lease_owner == "w1"
    assert (row.next_page, row.items_stored, row.items_failed) == (3, 98, 2)
    with pytest.raises(LeaseLostError):
        ledger.checkpoint(KEY, "w2", next_page=4, stored=1, failed=0)
    released = ledger.release(KEY, "w1")
    assert released.next_page == 3  # the next holder starts there


def test_ledger_a_stored_page_is_progress_strikes_count_from_there(
    ledger: Ledger, clock: ManualClock
):
    # GIVEN an attempt that failed (a strike), then one that stored two pages and was killed
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    failed = ledger.release(KEY, "w1", error="boom")
    ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")
    ledger.checkpoint(KEY, "w2", next_page=2, stored=50, failed=0, page_seconds=1.5)
    twice = ledger.checkpoint(KEY, "w2", next_page=3, stored=100, failed=0, page_seconds=2.0)
    clock.advance(61)  # w2 killed mid-page: its lease runs out
    # WHEN the next attempts store a page and release cleanly, then are killed before one
    ledger.acquire(KEY, "w3", lease_seconds=60, source="sqs")
    ledger.checkpoint(KEY, "w3", next_page=4, stored=150, failed=0)
    released = ledger.release(KEY, "w3")
    ledger.acquire(KEY, "w4", lease_seconds=60, source="sqs")  # killed: no page stored
    clock.advance(61)
    retaken = ledger.acquire(KEY, "w5", lease_seconds=60, source="sqs")

    # THEN a checkpoint clears the strikes (progress), a release after it takes nothing more,
    # and only attempts since the last progress count: the killed w4 and the running w5
    assert failed.strikes == 1
    assert twice.strikes == 0 and twice.page_seconds == 2.0
    assert released.strikes == 0 and released.next_page == 4
    assert retaken.row is not None and retaken.row.strikes == 2


@pytest.mark.parametrize(
    ("outcome", "reason", "reopens"),
    [
        (Outcome.DEAD_LETTERED, "unknown job", True),
        (Outcome.DEAD_LETTERED, "never settled", True),
        (Outcome.DEAD_LETTERED, "not retryable", False),
        (Outcome.STORED, "unknown job", False),
    ],
)
def test_ledger_reopen_only_overturns_closes_that_evidence_can_overturn(
    ledger: Ledger, clock: ManualClock, outcome: Outcome, reason: str, reopens: bool
):
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    ledger.release(KEY, "w1", error="boom")
    ledger.acquire(KEY, "w2", lease_seconds=60, source="sqs")
    record = "dead-letters/extract/job-1.json"
    closed = ledger.finish(KEY, "w2", outcome, {"reason": reason, "record": record})
    clock.advance(86_400)

    assert ledger.reopen(closed) is reopens
    row = ledger.get(KEY)
    assert row is not None
    if reopens:
        assert row.state is JobState.ENQUEUED and row.outcome is None
        assert row.strikes == 0 and row.last_error is None
        assert row.detail == {"reopened": reason, "superseded": record}
        assert not ledger.reopen(closed)  # the snapshot is stale now: one winner
    else:
        assert row == closed


def test_ledger_row_expires_counting_from_its_last_change(ledger: Ledger, clock: ManualClock):
    # GIVEN a row created now and changed again 80 days later (a job resubmitted, replayed)
    ttl = ledger.ttl_seconds
    created = ledger.record(KEY, source="webhook").row
    clock.advance(80 * 86_400)
    leased = ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs").row
    clock.advance(5 * 86_400)
    done = ledger.finish(KEY, "w1", Outcome.STORED)

    # THEN each write pushed the expiry to ttl after itself, never left it at creation's
    assert created.expires_at == int(created.created_at) + ttl
    assert leased is not None and leased.expires_at == int(leased.state_since) + ttl
    assert done.expires_at == int(clock.time()) + ttl


def test_ledger_every_write_pushes_the_expiry(ledger: Ledger, clock: ManualClock):
    # GIVEN a row moved by every kind of write, each a day after the one before
    def expiry_is_a_ttl_from_now(write: str) -> None:
        row = ledger.get(KEY)
        assert row is not None
        assert row.expires_at == int(clock.time()) + ledger.ttl_seconds, write
        clock.advance(86_400)

    ledger.record(KEY, source="job_list", state=JobState.ENQUEUED)
    enqueued = ledger.get(KEY)
    assert enqueued is not None
    clock.advance(86_400)
    # WHEN each write happens THEN the row then expires a TTL after it
    assert ledger.mark_enqueued(enqueued)
    expiry_is_a_ttl_from_now("mark_enqueued")
    assert ledger.note_late_webhook(enqueued)
    expiry_is_a_ttl_from_now("note_late_webhook")
    assert ledger.acquire(KEY, "w1", 3 * 86_400, source="sqs").granted
    expiry_is_a_ttl_from_now("acquire")
    ledger.checkpoint(KEY, "w1", next_page=2, stored=1, failed=0)
    expiry_is_a_ttl_from_now("checkpoint")
    ledger.release(KEY, "w1")
    expiry_is_a_ttl_from_now("release")
    assert ledger.acquire(KEY, "w2", 60, source="sqs").granted
    ledger.watch(KEY, "w2", job_created_at=0.0)
    expiry_is_a_ttl_from_now("watch")
    assert ledger.acquire(KEY, "w3", 60, source="sqs").granted
    ledger.finish(KEY, "w3", Outcome.DEAD_LETTERED, {"reason": "unknown job"})
    expiry_is_a_ttl_from_now("finish")
    closed = ledger.get(KEY)
    assert closed is not None
    assert ledger.reopen(closed)
    expiry_is_a_ttl_from_now("reopen")


def test_ledger_counts_and_lists_job_rows_only(ledger: Ledger):
    # GIVEN jobs in three states, and bookkeeping rows beside them
    waiting = [JobKey(JobKind.BATCH, f"b-{i}") for i in range(3)]
    for key in waiting:
        ledger.record(key, source="webhook")
    ledger.record(KEY, source="webhook")
    assert ledger.acquire(KEY, "w1", 60, source="sqs").granted
    ledger.finish(KEY, "w1", Outcome.STORED)
    crawl = JobKey(JobKind.CRAWL, "c-1")
    assert ledger.acquire(crawl, "w1", 60, source="sqs").granted
    bookkeeping = Bookkeeping(ledger)
    bookkeeping.write("checkpoint", {"watermark": "1.0"})
    bookkeeping.record_chain(JobKey(JobKind.EXTRACT, "resubmitted-1"), 1)
    assert bookkeeping.chain_depth(JobKey(JobKind.EXTRACT, "resubmitted-1")) == 1

    # WHEN the rows are counted and their keys listed
    counts = ledger.count_rows()
    keys = list(ledger.job_keys())

    # THEN only job rows count, by the state and outcome the ledger wrote
    assert counts.by_state == {"DONE": 1, "PROCESSING": 1, "RECEIVED": 3}
    assert counts.by_outcome == {"stored": 1}
    assert counts.jobs == 5
    assert sorted(keys, key=str) == sorted([*waiting, KEY, crawl], key=str)


def test_ledger_unclaim_puts_a_reopened_row_back_as_it_was_closed(
    ledger: Ledger, clock: ManualClock
):
    # GIVEN a job closed as unknown, reopened by evidence whose message then could not be sent
    ledger.record(KEY, source="webhook")
    ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs")
    closed = ledger.finish(
        KEY, "w1", Outcome.DEAD_LETTERED, {"reason": "unknown job", "record": "dead-letters/x"}
    )
    clock.advance(3600)
    written = ledger.reopened(closed)
    assert written is not None
    # WHEN the reopen is undone
    assert ledger.unclaim(closed, written)
    # THEN the row is the close again, out of the pending index, and the next evidence
    # reopens it (one winner again); an undo of the same write finds nothing to undo
    row = ledger.get(KEY)
    assert row is not None and row.reopenable
    assert (row.finished_at, row.detail) == (closed.finished_at, closed.detail)
    assert row.state_since == closed.state_since
    assert not ledger.unclaim(closed, written)
    assert ledger.reopen(row)


def test_ledger_unclaim_leaves_a_row_that_moved_on(ledger: Ledger, clock: ManualClock):
    # GIVEN a parked row woken (enqueue), then leased by a processor that found its message
    parked = ledger.record(KEY, source="watch", state=JobState.WATCHING).row
    clock.advance(60)
    written = ledger.enqueue(parked)
    assert written is not None
    assert ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs").granted
    # WHEN the waker's undo comes late
    # THEN it is refused: the row is the processor's now
    assert not ledger.unclaim(parked, written)
    row = ledger.get(KEY)
    assert row is not None and row.state is JobState.PROCESSING


def test_ledger_unclaim_puts_a_woken_row_back_to_sleep(ledger: Ledger, clock: ManualClock):
    parked = ledger.record(KEY, source="watch", state=JobState.WATCHING).row
    clock.advance(60)
    written = ledger.enqueue(parked)
    assert written is not None and ledger.unclaim(parked, written)
    row = ledger.get(KEY)
    assert row is not None
    assert (row.state, row.state_since) == (JobState.WATCHING, parked.state_since)
    assert ledger.mark_enqueued(row)  # the next evidence wakes it


def close_unknown(ledger: Ledger, owner: str) -> LedgerRow:
    """Lease the job and close it as unknown, as the processor does after its 404s."""
    assert ledger.acquire(KEY, owner, lease_seconds=60, source="sqs").granted
    return ledger.finish(KEY, owner, Outcome.DEAD_LETTERED, {"reason": "unknown job"})


def test_ledger_reopens_a_job_at_most_max_reopens_times_whatever_the_evidence(
    ledger: Ledger, clock: ManualClock
):
    # GIVEN a job that every reopen finds unknown again (the job list keeps showing it)
    ledger.record(KEY, source="early")
    moved = []
    for n in range(2 * DEFAULT_MAX_REOPENS):
        closed = close_unknown(ledger, f"w{n}")
        clock.advance(60)
        moved.append(ledger.reopen(closed))  # no delivery id: the job list's evidence
        if not moved[-1]:
            break
    # THEN it came back MAX_REOPENS times, and then stays closed: the loop ends
    assert moved == [True] * DEFAULT_MAX_REOPENS + [False]
    row = ledger.get(KEY)
    assert row is not None and row.reopens == DEFAULT_MAX_REOPENS and row.reopenable


def test_ledger_unclaimed_reopen_does_not_use_up_the_bound(ledger: Ledger, clock: ManualClock):
    ledger = Ledger(ledger.table_name, client=ledger.client, max_reopens=1, clock=clock)
    ledger.record(KEY, source="early")
    closed = close_unknown(ledger, "w1")
    # GIVEN a reopen whose message could not be sent, undone
    written = ledger.reopened(closed, evidence="d1")
    assert written is not None and written.reopens == 1
    assert ledger.unclaim(closed, written)
    # THEN the sender's retry (a delivery id of its own) may still reopen it, once
    row = ledger.get(KEY)
    assert row is not None and row.reopens == 0 and row.seen_deliveries == frozenset()
    assert ledger.reopened(row, evidence="d2") is not None
    assert ledger.reopened(close_unknown(ledger, "w2"), evidence="d3") is None


def test_ledger_unclaimed_reopen_forgets_its_evidence(ledger: Ledger, clock: ManualClock):
    # GIVEN a sender whose id is the event's, the same on every retry (Stripe's evt_...)
    ledger.record(KEY, source="early")
    closed = close_unknown(ledger, "w1")
    written = ledger.reopened(closed, evidence="evt_1")
    assert written is not None
    # WHEN its reopen is undone (the message could not be sent: 503, the sender retries)
    assert ledger.unclaim(closed, written)
    # THEN the retry, with the same id, reopens it
    row = ledger.get(KEY)
    assert row is not None and ledger.reopened(row, evidence="evt_1") is not None


def test_ledger_wakes_a_watched_job_once_per_delivery(ledger: Ledger, clock: ManualClock):
    # GIVEN a parked job its first webhook recorded
    ledger.record(KEY, source="webhook", state=JobState.WATCHING, delivery_id="d1")
    row = ledger.get(KEY)
    assert row is not None and row.seen_deliveries == {"d1"}
    clock.advance(60)
    # THEN that delivery wakes nothing; another does, and is kept
    assert ledger.enqueue(row, evidence="d1") is None
    woken = ledger.enqueue(row, evidence="d2")
    assert woken is not None and woken.seen_deliveries == {"d1", "d2"}
    again = ledger.get(KEY)
    assert again is not None and again.seen_deliveries == {"d1", "d2"}
    # AND once the processor parks it again, a snapshot that missed d2 cannot replay it: the
    # condition holds on the table, not on the caller's copy
    assert ledger.acquire(KEY, "w1", lease_seconds=60, source="sqs").granted
    parked = ledger.watch(KEY, "w1", job_created_at=clock.time())
    stale = replace(parked, seen_deliveries=frozenset())
    assert ledger.enqueue(stale, evidence="d2") is None
    # AND a wake undone (its message unsent) forgets its evidence: the sender's retry wakes it
    woken = ledger.enqueue(parked, evidence="d3")
    assert woken is not None and ledger.unclaim(parked, woken)
    assert ledger.enqueue(parked, evidence="d3") is not None
