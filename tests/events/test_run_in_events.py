"""A run's job events name the run, whichever of the journal's write and the webhook's row came
first: judged where a subscriber sees the events (a rule's SQS target on a moto bus), with the
run journal in the same moto table as the ledger, over real boto3.

The three orders: the journal's transaction before any webhook (the row is born with its run),
between the processor's lease and its DONE (the DONE's condition on the run refuses it: the
event is told for the run, written once), and after the DONE (the journal retells the settled
row's event: the outbox sends it again, the same ``event_id``, now naming the run).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.events.detail import outcome_event
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.resubmission import hand_on
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline_local.clock import ManualClock
from tests.events.bus_fixture import Subscriber, subscribe
from tests.support.template import create_ledger_table

BUS = "run-bus"
TABLE = "ledger"


class World:
    """The ledger, the run journal on its table, an emitter and a subscriber, in moto."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        db = boto3.client("dynamodb")
        create_ledger_table(db, TABLE)
        self.ledger = Ledger(TABLE, client=db, clock=self.clock)
        self.journal = DynamoJournal(TABLE, client=db)
        events = boto3.client("events")
        events.create_event_bus(Name=BUS)
        self.subscriber: Subscriber = subscribe(events, boto3.client("sqs"), BUS)
        self.emitter = Emitter(BUS, self.ledger, client=events)

    def posted(self, mode: RunMode, url: str) -> Entry:
        """A run of one URL planned and its entry claimed: the POST is under way."""
        run, _ = self.journal.plan(RunSpec.of([url], mode), "nightly", self.clock.time())
        [entry] = self.journal.entries(run.name)
        return self.journal.claim(entry, "submitter", self.clock.time())

    def recorded(self, entry: Entry, job_id: str) -> None:
        """The journal's write of the job id the API answered."""
        self.journal.submit(entry, "submitter", job_id, self.clock.time())

    def lease(self, key: JobKey, *, webhook: bool) -> Any:
        """The processor's lease (the webhook's row first, when it came before)."""
        if webhook:
            self.ledger.record(key, source="webhook")
        lease = self.ledger.acquire(key, "processor", 60, source="sqs")
        assert lease.granted and lease.row is not None
        return lease.row

    def finish(self, key: JobKey, row: Any) -> None:
        """The processor's DONE with its event (told for the run the row names), then its
        batch's emit."""

        def told(run: str | None) -> str:
            event = outcome_event(
                key,
                Outcome.STORED,
                reopens=0,
                finished_at=self.clock.time(),
                bucket="results",
                detail={"prefix": f"results/{key.kind.value}/{key.job_id}"},
                run=run,
            )
            assert event is not None
            return event.to_json()

        done = self.ledger.finish(key, "processor", Outcome.STORED, {}, event=told, run=row.run)
        assert done.outbox_event is not None
        self.emitter.add(key, done.outbox_event, self.clock.time())
        self.emitter.flush(self.clock.time())

    def sweep(self) -> None:
        """The outbox sweep: what is still owed, sent."""
        pending, _ = self.ledger.pending_events(before=self.clock.time() + 1)
        self.emitter.emit(pending)

    def events(self) -> list[dict[str, Any]]:
        return [e["detail"] for e in self.subscriber.received()]


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws():
        yield World()


@pytest.mark.parametrize("mode", [RunMode.ASYNC, RunMode.CRAWL])
def test_a_job_recorded_before_its_webhook_is_born_with_its_run(world: World, mode: RunMode):
    key = JobKey(JobKind(mode.kind), "job-1")
    entry = world.posted(mode, "https://example.com/a")
    world.recorded(entry, key.job_id)
    world.finish(key, world.lease(key, webhook=True))
    world.sweep()
    [event] = world.events()
    assert (event["run"], event["job_id"]) == ("nightly", "job-1")


def test_a_run_recorded_while_the_job_is_processed_is_named_by_its_event(world: World):
    key = JobKey(JobKind.EXTRACT, "job-2")
    entry = world.posted(RunMode.ASYNC, "https://example.com/b")
    # GIVEN the webhook's row leased by the processor before the journal wrote the job id
    row = world.lease(key, webhook=True)
    assert row.run is None
    world.recorded(entry, key.job_id)
    # WHEN the processor settles it
    world.finish(key, row)
    world.sweep()
    # THEN its one event names the run
    [event] = world.events()
    assert event["run"] == "nightly"


def test_a_run_recorded_after_the_job_settled_retells_its_event_with_the_same_id(world: World):
    key = JobKey(JobKind.BATCH, "job-3")
    entry = world.posted(RunMode.BATCH, "https://example.com/c")
    # GIVEN the job stored and its event sent before the journal wrote its id (an answer lost,
    # the POST adopted later, or a webhook and processor quicker than the journal)
    world.finish(key, world.lease(key, webhook=True))
    [first] = world.events()
    assert "run" not in first
    # WHEN the journal records it, and the outbox sweep runs
    world.recorded(entry, key.job_id)
    world.sweep()
    world.sweep()
    # THEN the event came once more, with the same id, now naming the run; and no more
    [again] = world.events()
    assert again["event_id"] == first["event_id"] and again["run"] == "nightly"
    assert {k: v for k, v in again.items() if k != "run"} == first
    # AND the row is settled as it was, out of the outbox
    done = world.ledger.get(key)
    assert done is not None and done.is_done and done.run == "nightly"
    assert world.ledger.pending_events(before=world.clock.time() + 1)[0] == []


@pytest.mark.parametrize("successor_first", [False, True], ids=["handed-on-first", "settled-first"])
def test_a_resubmission_of_a_runs_job_names_the_run_in_its_event(
    world: World, successor_first: bool
):
    # GIVEN a run's job that failed retryably, held by the processor, which resubmitted it
    first, again = JobKey(JobKind.EXTRACT, "job-4"), JobKey(JobKind.EXTRACT, "job-5")
    entry = world.posted(RunMode.ASYNC, "https://example.com/d")
    world.recorded(entry, first.job_id)
    row = world.lease(first, webhook=True)
    if successor_first:  # the new job's webhook and processor quicker than the hand-on
        world.finish(again, world.lease(again, webhook=True))
        [told] = world.events()
        assert "run" not in told
    # WHEN the failed job's holder hands its run on to the new job, and the new job settles
    hand_on(world.ledger, row, "processor", again.job_id)
    if not successor_first:
        world.finish(again, world.lease(again, webhook=True))
    world.sweep()
    # THEN the new job's event (the same id, if it was told before) names the run, once more
    [event] = world.events()
    assert (event["job_id"], event["run"]) == (again.job_id, "nightly")
    if successor_first:
        assert event["event_id"] == told["event_id"]
    # AND the failed job's row notes the new job for whoever follows the chain
    noted = world.ledger.get(first)
    assert noted is not None and noted.detail.get("resubmitted_as") == again.job_id


def test_a_resubmission_that_adopted_another_runs_job_leaves_that_run_on_it(world: World):
    # GIVEN a job the run "nightly" made for a URL
    theirs = world.posted(RunMode.ASYNC, "https://example.com/e")
    adopted = JobKey(JobKind.EXTRACT, "job-7")
    world.recorded(theirs, adopted.job_id)
    # WHEN a resubmission of another run's job for the URL adopts it and carries its run on
    row = world.ledger.carry_run(adopted, "other-run")
    # THEN the row names the run that made the job, as it did
    assert row.run == "nightly"
    stored = world.ledger.get(adopted)
    assert stored is not None and stored.run == "nightly"


def test_a_batch_items_retry_in_a_run_names_the_batchs_run_in_its_event(world: World):
    # GIVEN a batch run's batch, one of whose items is retried as an extract job, linked to
    # the item with the batch's run (as the batch's holder links it)
    entry = world.posted(RunMode.BATCH, "https://example.com/f")
    world.recorded(entry, "batch-1")
    retry = JobKey(JobKind.EXTRACT, "job-8")
    world.ledger.link_retry(retry, "batch#batch-1#0", run="nightly")
    # WHEN the retry's job is stored
    world.finish(retry, world.lease(retry, webhook=True))
    world.sweep()
    # THEN its event names the batch's run
    [event] = world.events()
    assert (event["job_id"], event["run"]) == (retry.job_id, "nightly")
