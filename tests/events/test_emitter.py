"""The outbox's emitter against moto over real boto3: batching, refusals, and clearing rows.

PutEvents calls are counted with a botocore event hook on the client, never by a stand-in
client; the events are judged where a subscriber sees them (a rule's SQS target).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.events.detail import DetailType, OutcomeEvent, event_id, outcome_event
from scrape_pipeline.events.outbox import MAX_REQUEST_BYTES, Emitter, chunks, entry_size
from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline_local.clock import ManualClock
from tests.events.bus_fixture import Subscriber, subscribe
from tests.support.template import create_ledger_table

BUS = "test-bus"


@dataclass
class World:
    ledger: Ledger
    emitter: Emitter
    subscriber: Subscriber
    events_client: Any
    clock: ManualClock
    put_calls: list[int]  # entries per PutEvents call, as the client sent them


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws():
        clock = ManualClock()
        db = boto3.client("dynamodb")
        create_ledger_table(db, "ledger")
        ledger = Ledger("ledger", client=db, clock=clock)
        events = boto3.client("events")
        events.create_event_bus(Name=BUS)
        subscriber = subscribe(events, boto3.client("sqs"), BUS)
        calls: list[int] = []

        def count(params: dict[str, Any], **_: Any) -> None:
            calls.append(len(params["Entries"]))

        events.meta.events.register("provide-client-params.events.PutEvents", count)
        yield World(ledger, Emitter(BUS, ledger, client=events), subscriber, events, clock, calls)


def settle(world: World, job_id: str, outcome: Outcome = Outcome.STORED) -> str:
    """A job leased and finished with ``outcome``, its event in the outbox; the event's text."""
    key = JobKey(JobKind.EXTRACT, job_id)
    lease = world.ledger.acquire(key, "owner", 60, source="test")
    assert lease.granted and lease.row is not None
    detail = {"prefix": f"results/extract/{job_id}", "tokens_charged": "3"}
    event = outcome_event(
        key,
        outcome,
        reopens=lease.row.reopens,
        finished_at=world.clock.time(),
        bucket="results",
        detail=detail,
        url=f"https://example.com/{job_id}",
        keys=[f"results/extract/{job_id}/metadata.json"],
    )
    assert event is not None
    text = event.to_json()
    world.ledger.finish(key, "owner", outcome, detail, event=text)
    world.emitter.add(key, text, world.clock.time())
    return text


def outbox(world: World) -> list[str]:
    """Job ids still owing an event, from the sparse index."""
    pending, _ = world.ledger.pending_events(before=world.clock.time() + 1, limit=1000)
    return sorted(p.key.job_id for p in pending)


def test_25_outcomes_go_out_in_3_put_events_calls_and_leave_the_outbox(world: World) -> None:
    # GIVEN 25 outcomes written with their events (one processor batch's worth, say)
    for n in range(25):
        settle(world, f"job-{n:02d}")
    assert len(outbox(world)) == 25
    # WHEN the batch's end emits them
    result = world.emitter.flush(world.clock.time())
    # THEN three calls of 10, 10 and 5 entries carried them
    assert world.put_calls == [10, 10, 5]
    assert (result.calls, result.sent, result.left, result.cleared) == (3, 25, 0, 25)
    # AND a subscriber got each outcome once, with its detail
    received = world.subscriber.received()
    ids = Counter(e["detail"]["event_id"] for e in received)
    assert len(ids) == 25 and set(ids.values()) == {1}
    first = next(e for e in received if e["detail"]["job_id"] == "job-00")
    assert first["source"] == "scrape-pipeline"
    assert first["detail-type"] == "Job Stored"
    assert first["detail"]["event_id"] == event_id(
        JobKey(JobKind.EXTRACT, "job-00"), Outcome.STORED, 0
    )
    assert first["detail"]["url"] == "https://example.com/job-00"
    assert first["detail"]["keys"] == ["results/extract/job-00/metadata.json"]
    assert first["detail"]["tokens_charged"] == 3
    # AND no row owes an event any more
    assert outbox(world) == []


def test_an_entry_the_bus_refuses_stays_in_the_outbox_and_goes_out_later_same_id(
    world: World,
) -> None:
    # GIVEN three outcomes, and a bus that refuses the second entry of the next call.
    # moto accepts every entry it is given (it never answers FailedEntryCount > 0), so the
    # refusal is injected at the client boundary, in the parsed response, the way
    # EventBridge reports a throttled entry: ErrorCode in that entry's place.
    texts = [settle(world, f"job-{n}") for n in range(3)]
    refused = OutcomeEvent.from_json(texts[1]).event_id

    def refuse_second(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Entries"][1] = {"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"}
        parsed["FailedEntryCount"] = 1

    world.events_client.meta.events.register("after-call.events.PutEvents", refuse_second)
    result = world.emitter.flush(world.clock.time())
    world.events_client.meta.events.unregister("after-call.events.PutEvents", refuse_second)
    # THEN the refused one is left on its row, the others cleared
    assert (result.sent, result.left, result.cleared) == (2, 1, 2)
    assert outbox(world) == ["job-1"]
    # WHEN the outbox is emitted again (the sweep's way: from the index)
    pending, _ = world.ledger.pending_events(before=world.clock.time() + 1)
    again = world.emitter.emit(pending)
    # THEN it goes out with the same id, and the outbox is empty
    assert (again.sent, again.cleared) == (1, 1)
    assert outbox(world) == []
    last = [e["detail"]["event_id"] for e in world.subscriber.received()]
    # moto delivered the refused entry too (it cannot refuse): the repeat has the same id
    assert last.count(refused) == 2


def lingering(world: World, seconds: float) -> Emitter:
    """``world``'s emitter, holding short calls' events up to ``seconds``."""
    world.emitter = Emitter(BUS, world.ledger, client=world.events_client, linger=seconds)
    return world.emitter


def test_with_a_linger_short_batches_fill_one_call_across_batch_ends(world: World) -> None:
    # GIVEN a 30 s linger, and a batch's end with 4 outcomes (a nightly pace's batch)
    emitter = lingering(world, 30)
    for n in range(4):
        settle(world, f"job-{n:02d}")
    first = emitter.flush(world.clock.time())
    # THEN no call is made yet, and the rows still owe their events (a crash loses nothing)
    assert (first.calls, emitter.held, world.put_calls) == (0, 4, [])
    assert len(outbox(world)) == 4
    # WHEN two more batches end 5 s apart with 4 outcomes each
    for batch in (1, 2):
        world.clock.advance(5)
        for n in range(4):
            settle(world, f"job-{batch}{n}")
        emitter.flush(world.clock.time())
    # THEN one full call carried the ten oldest, and the two youngest wait
    assert world.put_calls == [10]
    assert emitter.held == 2
    assert len(outbox(world)) == 2
    # WHEN a batch ends just short of the linger for them, they still wait
    world.clock.advance(29)
    assert emitter.flush(world.clock.time()).calls == 0
    # AND once they have waited it, the next batch's end sends them
    world.clock.advance(1)
    last = emitter.flush(world.clock.time())
    assert world.put_calls == [10, 2]
    assert (last.sent, last.cleared, emitter.held) == (2, 2, 0)
    # AND a subscriber got all twelve outcomes, each once
    ids = Counter(e["detail"]["event_id"] for e in world.subscriber.received())
    assert len(ids) == 12 and set(ids.values()) == {1}
    assert outbox(world) == []


def test_with_a_linger_a_batch_of_ten_or_more_goes_out_at_once(world: World) -> None:
    # GIVEN a linger and a batch's end with 13 outcomes
    emitter = lingering(world, 30)
    for n in range(13):
        settle(world, f"job-{n:02d}")
    emitter.flush(world.clock.time())
    # THEN the full call leaves at once and only the three youngest wait
    assert world.put_calls == [10]
    assert sorted(outbox(world)) == ["job-10", "job-11", "job-12"]


def test_held_events_of_a_container_never_invoked_again_are_the_sweeps(world: World) -> None:
    # GIVEN events held by a lingering emitter whose container is then frozen for good
    emitter = lingering(world, 30)
    texts = [settle(world, f"job-{n}") for n in range(3)]
    emitter.flush(world.clock.time())
    assert world.put_calls == []
    # WHEN the sweep's grace has passed and it emits what the index still owes
    world.clock.advance(91)
    pending, _ = world.ledger.pending_events(before=world.clock.time() - 90)
    swept = Emitter(BUS, world.ledger, client=world.events_client).emit(pending)
    # THEN the three go out, once each, with the ids their rows were written with
    assert (swept.sent, swept.cleared) == (3, 3)
    received = [e["detail"]["event_id"] for e in world.subscriber.received()]
    assert sorted(received) == sorted(OutcomeEvent.from_json(t).event_id for t in texts)
    assert outbox(world) == []


def test_a_failed_call_leaves_every_event_in_the_outbox(world: World) -> None:
    # GIVEN outcomes, and a bus that does not exist (the call fails altogether)
    settle(world, "job-a")
    settle(world, "job-b")
    world.emitter.bus_name = "no-such-bus"
    # WHEN emitted
    result = world.emitter.flush(world.clock.time())
    # THEN nothing is cleared, the error is named, and both rows still owe their event
    assert (result.sent, result.left, result.cleared) == (0, 2, 0)
    assert result.errors
    assert outbox(world) == ["job-a", "job-b"]


def test_clear_outbox_only_clears_the_event_it_emitted(world: World) -> None:
    # GIVEN a row owing one event
    text = settle(world, "job-x")
    key = JobKey(JobKind.EXTRACT, "job-x")
    # THEN a different event (a later outcome's) does not clear it; its own does, once
    assert not world.ledger.clear_outbox(key, text.replace("job-x", "job-y"))
    assert world.ledger.clear_outbox(key, text)
    assert not world.ledger.clear_outbox(key, text)
    assert outbox(world) == []


def test_event_ids_are_stable_per_outcome_and_new_after_a_reopen() -> None:
    key = JobKey(JobKind.BATCH, "b-1")
    assert event_id(key, Outcome.STORED, 0) == event_id(key, Outcome.STORED, 0)
    assert event_id(key, Outcome.STORED, 0) != event_id(key, Outcome.STORED, 1)
    assert event_id(key, Outcome.STORED, 0) != event_id(key, Outcome.CANCELLED, 0)
    assert event_id(key, Outcome.STORED, 0) != event_id(
        JobKey(JobKind.CRAWL, "b-1"), Outcome.STORED, 0
    )


def test_only_told_outcomes_have_an_event_and_batches_name_their_manifest() -> None:
    key = JobKey(JobKind.CRAWL, "c-1")
    common: dict[str, Any] = {"reopens": 0, "finished_at": 10.0, "bucket": "b"}
    assert outcome_event(key, Outcome.RESUBMITTED, detail={}, **common) is None
    stored = outcome_event(
        key, Outcome.STORED, detail={"prefix": "results/crawl/c-1", "items_stored": "7"}, **common
    )
    assert stored is not None and stored.detail_type is DetailType.STORED
    assert stored.detail["manifest_key"] == "results/crawl/c-1/manifest.json"
    assert stored.detail["items_stored"] == 7
    dead = outcome_event(
        key,
        Outcome.DEAD_LETTERED,
        detail={"record": "dead-letters/crawl/c-1.json", "reason": "batch failed"},
        **common,
    )
    assert dead is not None and dead.detail_type is DetailType.DEAD_LETTERED
    assert (dead.detail["reason"], dead.detail["record_key"]) == (
        "batch failed",
        "dead-letters/crawl/c-1.json",
    )


def test_calls_are_cut_at_256_kb_as_well_as_at_ten_entries() -> None:
    # GIVEN entries of about 100 KB each: two fit in a call, not three
    big = {"Source": "scrape-pipeline", "DetailType": "Job Stored", "Detail": "x" * 100_000}
    small = {**big, "Detail": "{}"}
    assert [len(c) for c in chunks([big] * 5)] == [2, 2, 1]
    assert [len(c) for c in chunks([small] * 23)] == [10, 10, 3]
    assert 2 * entry_size(big) <= MAX_REQUEST_BYTES < 3 * entry_size(big)
