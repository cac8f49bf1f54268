"""A run's manifest and its ``Run Completed``: written once its last job settles, never before,
and told exactly once by ``event_id``, a refused emit included.

Judged from outside: the run is posted to the simulator over HTTP through the DynamoDB journal
(a moto server on 127.0.0.1, the ledger table from template.yaml's definition), its jobs
settled on the ledger with the events the processor writes, the manifest read back from S3
with boto3, and the events where a subscriber sees them (a rule's SQS target on the bus).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import boto3
import pytest

from scrape_pipeline.events.detail import outcome_event
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.manifest import manifest_key
from scrape_pipeline.processor.resubmission import hand_on
from scrape_pipeline.processor.results import ResultStore
from scrape_pipeline.reconciler.report import ReconcileReport, SweepResult
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps import Budget
from scrape_pipeline.reconciler.sweeps.ledger_scans import SWEEP_OUTBOX
from scrape_pipeline.reconciler.sweeps.runs import SWEEP_RUNS, RunsSweep
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline_local.clock import ManualClock
from tests.events.bus_fixture import Subscriber, subscribe
from tests.runs.conftest import client, clock, moto_endpoint, server, table

__all__ = ["client", "clock", "moto_endpoint", "server", "table"]
BUCKET = "results"
BUS = "runs-bus"


@dataclass
class World:
    ledger: Ledger
    journal: DynamoJournal
    s3: Any
    subscriber: Subscriber
    events_client: Any
    clock: ManualClock

    def run_sweep(self, bus: str = BUS) -> SweepResult:
        """One run of the run sweep, emitting on ``bus`` (one that is not there refuses)."""
        sweep = RunsSweep(
            ReconcilerSettings(),
            ledger=self.ledger,
            client=cast("Any", None),  # the run sweep calls neither the API
            recoverer=cast("Any", None),  # nor the queue
            clock=self.clock,
            emitter=Emitter(bus, self.ledger, client=self.events_client),
            results=ResultStore(BUCKET, client=self.s3),
        )
        return sweep.run(Budget.no_deadline())

    def manifest(self, run: str) -> dict[str, Any] | None:
        try:
            body = self.s3.get_object(Bucket=BUCKET, Key=f"runs/{run}/manifest.json")["Body"]
        except self.s3.exceptions.NoSuchKey:
            return None
        return cast("dict[str, Any]", json.loads(body.read()))


@pytest.fixture
def world(table: tuple[str, str], clock: ManualClock) -> World:
    endpoint, name = table
    db = boto3.client("dynamodb", endpoint_url=endpoint)
    s3 = boto3.client("s3", endpoint_url=endpoint)
    if BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    events = boto3.client("events", endpoint_url=endpoint)
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    if BUS not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=BUS)
    subscriber = subscribe(events, sqs, BUS, name=f"sub-{name}")
    ledger = Ledger(name, client=db, clock=clock)
    return World(ledger, DynamoJournal(name, client=db), s3, subscriber, events, clock)


def _settle(world: World, kind: JobKind, job_id: str, outcome: Outcome, url: str) -> None:
    """The processor's DONE of one job, with the event it writes (the run named, as read)."""
    key = JobKey(kind, job_id)
    lease = world.ledger.acquire(key, "processor", 60, source="sqs")
    assert lease.granted and lease.row is not None
    prefix = f"results/{kind.value}/{job_id}"
    if outcome is Outcome.STORED:
        detail = {"prefix": prefix, "tokens_charged": "2"}
        keys = [f"{prefix}/content.md", f"{prefix}/metadata.json"]
    else:
        detail = {"reason": "not retryable", "record": f"dead-letters/{kind.value}/{job_id}.json"}
        keys = None
    event = outcome_event(
        key,
        outcome,
        reopens=0,
        finished_at=world.clock.time(),
        bucket=BUCKET,
        detail=detail,
        url=url,
        keys=keys,
        run=lease.row.run,
    )
    assert event is not None
    world.ledger.finish(key, "processor", outcome, detail, event=event.to_json())
    world.ledger.clear_outbox(key, event.to_json())  # emitted by the processor meanwhile


def _run_completed(world: World) -> list[dict[str, Any]]:
    return [e for e in world.subscriber.received() if e["detail-type"] == "Run Completed"]


def test_a_run_gets_its_manifest_and_one_run_completed_only_once_every_job_settled(
    world: World, client: GeonodeClient, clock: ManualClock
):
    # GIVEN an extract run of three URLs posted through the DynamoDB journal
    urls = [f"https://example.com/run-complete/{i}" for i in range(3)]
    submitter = Submitter(
        world.journal, client, clock=clock, pace=Pace(clock), rng=random.Random(5)
    )
    report = submitter.submit(RunSpec.of(urls, RunMode.ASYNC), "tonight")
    assert report.complete
    jobs = {e.urls[0]: e.job_id or "" for e in report.entries}
    # WHEN the run sweep runs with none, then two of its jobs settled
    assert world.run_sweep().runs_completed == 0
    _settle(world, JobKind.EXTRACT, jobs[urls[0]], Outcome.STORED, urls[0])
    _settle(world, JobKind.EXTRACT, jobs[urls[1]], Outcome.DEAD_LETTERED, urls[1])
    assert world.run_sweep().runs_completed == 0
    # THEN no manifest and no event: a job of the run is still unsettled
    assert world.manifest("tonight") is None
    assert _run_completed(world) == []
    # WHEN the last job settles and the sweep runs, twice
    _settle(world, JobKind.EXTRACT, jobs[urls[2]], Outcome.STORED, urls[2])
    first = world.run_sweep()
    world.run_sweep()
    # THEN the manifest lists every URL with its job, outcome and keys
    assert first.runs_completed == 1
    manifest = world.manifest("tonight")
    assert manifest is not None
    by_url = {u["url"]: u for u in manifest["urls"]}
    assert sorted(by_url) == sorted(urls)
    assert {u: by_url[u]["job_id"] for u in urls} == jobs
    assert by_url[urls[0]]["outcome"] == "stored"
    assert f"results/extract/{jobs[urls[0]]}/metadata.json" in by_url[urls[0]]["keys"]
    assert by_url[urls[1]]["outcome"] == "dead_lettered"
    assert by_url[urls[1]]["keys"] == [f"dead-letters/extract/{jobs[urls[1]]}.json"]
    assert manifest["counts"] == {"urls": 3, "jobs": 3, "stored": 2, "dead_lettered": 1}
    assert manifest["tokens_charged"] == 4
    # AND it was written once (one version)
    versions = world.s3.list_object_versions(Bucket=BUCKET, Prefix="runs/tonight/")
    assert len(versions["Versions"]) == 1
    # AND one Run Completed came, naming the manifest
    [event] = _run_completed(world)
    assert event["source"] == "scrape-pipeline"
    detail = event["detail"]
    assert detail["run"] == "tonight" and detail["bucket"] == BUCKET
    assert detail["manifest_key"] == "runs/tonight/manifest.json"
    assert detail["counts"] == manifest["counts"] and detail["tokens_charged"] == 4


def test_a_refused_run_completed_is_sent_again_by_the_next_sweep_with_its_id(
    world: World, client: GeonodeClient, clock: ManualClock
):
    # GIVEN a batch run of three URLs in two batches, both settled (dead-lettered whole)
    urls = [f"https://example.com/run-batch/{i}" for i in range(3)]
    submitter = Submitter(
        world.journal, client, clock=clock, pace=Pace(clock), rng=random.Random(6)
    )
    report = submitter.submit(RunSpec.of(urls, RunMode.BATCH, batch_size=2), "batches")
    assert report.complete
    for entry in report.entries:
        _settle(world, JobKind.BATCH, entry.job_id or "", Outcome.DEAD_LETTERED, entry.urls[0])
    # WHEN the sweep completes it but the bus refuses the event (a bus that is not there)
    refused = world.run_sweep(bus="no-such-bus")
    assert refused.runs_completed == 1 and refused.events_sent == 0
    assert _run_completed(world) == []
    # AND the next sweeps run on the bus
    again = world.run_sweep()
    world.run_sweep()
    # THEN the event came once, and the manifest was not written again
    assert again.runs_completed == 0 and again.events_sent == 1
    ids = Counter(e["detail"]["event_id"] for e in _run_completed(world))
    assert list(ids.values()) == [1]
    manifest = world.manifest("batches")
    assert manifest is not None and manifest["counts"]["urls"] == 3
    assert {u["outcome"] for u in manifest["urls"]} == {"dead_lettered"}
    versions = world.s3.list_object_versions(Bucket=BUCKET, Prefix="runs/batches/")
    assert len(versions["Versions"]) == 1


def test_a_run_with_an_entry_in_doubt_is_not_complete_whatever_its_jobs_did(
    world: World, clock: ManualClock
):
    # GIVEN a run of two URLs: one submitted and its job stored, one whose POST's answer was lost
    spec = RunSpec.of(["https://example.com/doubt/0", "https://example.com/doubt/1"], RunMode.ASYNC)
    run, _ = world.journal.plan(spec, "doubtful", clock.time())
    first, second = world.journal.entries(run.name)
    world.journal.submit(world.journal.claim(first, "me", clock.time()), "me", "j-0", clock.time())
    _settle(world, JobKind.EXTRACT, "j-0", Outcome.STORED, first.urls[0])
    world.journal.doubt(world.journal.claim(second, "me", clock.time()), "me", "timeout", 0.0)
    # WHEN the sweep runs
    result = world.run_sweep()
    # THEN the run stays open: no manifest, no event (runs show would exit 1 too)
    assert (result.runs_checked, result.runs_completed) == (1, 0)
    assert world.manifest("doubtful") is None and _run_completed(world) == []
    # WHEN the doubt is resolved (its job found and adopted) and that job settles
    [doubt] = [e for e in world.journal.entries(run.name) if e.index == 1]
    world.journal.adopt(doubt, "j-1", clock.time())
    _settle(world, JobKind.EXTRACT, "j-1", Outcome.CANCELLED, second.urls[0])
    world.run_sweep()
    # THEN it completes, once
    [event] = _run_completed(world)
    assert event["detail"]["counts"] == {"urls": 2, "jobs": 2, "stored": 1, "cancelled": 1}


def _resubmitted(world: World, job_id: str, successor: str) -> None:
    """The processor's close of a job that failed retryably: what the run followed it for
    handed on to ``successor`` (the job its resubmission made), then DONE resubmitted."""
    key = JobKey(JobKind.EXTRACT, job_id)
    lease = world.ledger.acquire(key, "processor", 60, source="sqs")
    assert lease.granted and lease.row is not None
    hand_on(world.ledger, lease.row, "processor", successor)
    detail = {DETAIL_RESUBMITTED_AS: successor, "adopted": "false"}
    world.ledger.finish(key, "processor", Outcome.RESUBMITTED, detail)


def test_a_run_whose_job_was_resubmitted_completes_with_the_job_that_ended_its_chain(
    world: World, client: GeonodeClient, clock: ManualClock
):
    # GIVEN an extract run of two URLs, the first URL's job failed retryably and resubmitted
    urls = [f"https://example.com/run-chain/{i}" for i in range(2)]
    submitter = Submitter(
        world.journal, client, clock=clock, pace=Pace(clock), rng=random.Random(5)
    )
    report = submitter.submit(RunSpec.of(urls, RunMode.ASYNC), "chained")
    jobs = {e.urls[0]: e.job_id or "" for e in report.entries}
    again = client.submit_extract(urls[0]).job_id
    _resubmitted(world, jobs[urls[0]], again)
    _settle(world, JobKind.EXTRACT, jobs[urls[1]], Outcome.STORED, urls[1])
    # WHEN the run sweep runs while the resubmission still runs
    assert world.run_sweep().runs_completed == 0
    # THEN no manifest and no event yet
    assert world.manifest("chained") is None and _run_completed(world) == []
    # WHEN the resubmission is stored (its event names the run) and the sweep runs
    _settle(world, JobKind.EXTRACT, again, Outcome.STORED, urls[0])
    assert world.run_sweep().runs_completed == 1
    # THEN the manifest gives the URL the job that ended its chain, its keys, and the chain
    manifest = world.manifest("chained")
    assert manifest is not None
    first = manifest["urls"][0]
    assert (first["url"], first["job_id"], first["outcome"]) == (urls[0], again, "stored")
    assert first["chain"] == [jobs[urls[0]], again]
    assert f"results/extract/{again}/metadata.json" in first["keys"]
    assert manifest["counts"] == {"urls": 2, "jobs": 3, "stored": 2}
    [done] = _run_completed(world)
    assert done["detail"]["counts"] == manifest["counts"]
    # AND the resubmission's row names the run, so its event did
    row = world.ledger.get(JobKey(JobKind.EXTRACT, again))
    assert row is not None and row.run == "chained"


def _settled_but_not_emitted(world: World, job_id: str, url: str) -> None:
    """The processor's DONE stored of one job, killed before its emit: the event waits in the
    row's outbox for the outbox sweep."""
    key = JobKey(JobKind.EXTRACT, job_id)
    lease = world.ledger.acquire(key, "processor", 60, source="sqs")
    assert lease.granted and lease.row is not None
    prefix = f"results/extract/{job_id}"
    keys = [f"{prefix}/content.md", f"{prefix}/metadata.json"]
    detail = {"prefix": prefix, "tokens_charged": "2"}
    event = outcome_event(
        key,
        Outcome.STORED,
        reopens=0,
        finished_at=world.clock.time(),
        bucket=BUCKET,
        detail=detail,
        url=url,
        keys=keys,
        run=lease.row.run,
    )
    assert event is not None
    world.ledger.finish(key, "processor", Outcome.STORED, detail, event=event.to_json())


def _outbox_then_runs(world: World, clock: ManualClock) -> Callable[[], list[dict[str, Any]]]:
    """A run of the reconciler's outbox sweep then its run sweep, in its order: what the
    subscriber got from it. Neither sweep calls the API nor the queue."""
    reconciler = Reconciler(
        ReconcilerSettings(),
        ledger=world.ledger,
        client=cast("Any", None),
        recoverer=cast("Any", None),
        clock=clock,
        emitter=Emitter(BUS, world.ledger, client=world.events_client),
        results=ResultStore(BUCKET, client=world.s3),
    )

    def reconcile() -> list[dict[str, Any]]:
        for name in (SWEEP_OUTBOX, SWEEP_RUNS):
            reconciler.run_sweep(name, ReconcileReport())
        return world.subscriber.received()

    return reconcile


def test_run_completed_waits_for_a_final_jobs_event_still_in_the_outbox(
    world: World, client: GeonodeClient, clock: ManualClock
):
    # GIVEN an extract run of two URLs, both jobs stored, but the second's processor killed
    # between its DONE and its emit: its Job Stored waits in the outbox for the sweep's grace
    urls = [f"https://example.com/run-outbox/{i}" for i in range(2)]
    submitter = Submitter(
        world.journal, client, clock=clock, pace=Pace(clock), rng=random.Random(7)
    )
    report = submitter.submit(RunSpec.of(urls, RunMode.ASYNC), "owing")
    jobs = {e.urls[0]: e.job_id or "" for e in report.entries}
    _settle(world, JobKind.EXTRACT, jobs[urls[0]], Outcome.STORED, urls[0])
    _settled_but_not_emitted(world, jobs[urls[1]], urls[1])
    reconcile = _outbox_then_runs(world, clock)

    # WHEN the reconciler runs within the outbox's grace
    early = reconcile()
    # THEN no Run Completed: a URL's final outcome has not reached the bus yet
    assert [e["detail-type"] for e in early] == [], early
    # WHEN it runs once the grace has passed
    clock.advance(ReconcilerSettings().outbox_grace_seconds + 1)
    late = reconcile()
    # THEN the owed Job Stored came, then the run's one Run Completed, in that same run
    order = [(e["detail-type"], e["detail"].get("job_id")) for e in late]
    assert order == [("Job Stored", jobs[urls[1]]), ("Run Completed", None)], order
    assert late[1]["detail"]["counts"] == {"urls": 2, "jobs": 2, "stored": 2}
    # AND nothing more comes after
    assert reconcile() == []


def test_run_completed_waits_for_a_batch_items_retry_whose_event_is_still_in_the_outbox(
    world: World, client: GeonodeClient, clock: ManualClock
):
    # GIVEN a batch run of two URLs in one batch, whose first item failed retryably and was
    # retried as an extract job: that job stored, its processor killed before its emit
    urls = [f"https://example.com/run-retry/{i}" for i in range(2)]
    submitter = Submitter(
        world.journal, client, clock=clock, pace=Pace(clock), rng=random.Random(8)
    )
    report = submitter.submit(RunSpec.of(urls, RunMode.BATCH, batch_size=2), "retried")
    [entry] = report.entries
    batch = entry.job_id or ""
    retry = client.submit_extract(urls[0]).job_id
    _settled_but_not_emitted(world, retry, urls[0])
    # AND the batch stored (its event sent), its manifest naming the retry as item 0's job
    items = [
        {"index": 0, "url": urls[0], "status": "stored", "keys": [], "retry_job": retry},
        {"index": 1, "url": urls[1], "status": "stored", "keys": []},
    ]
    key = manifest_key(JobKind.BATCH, batch)
    world.s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps({"items": items}).encode())
    _settle(world, JobKind.BATCH, batch, Outcome.STORED, urls[0])
    world.subscriber.received()  # the batch's own event: not what this test is about
    reconcile = _outbox_then_runs(world, clock)

    # WHEN the reconciler runs within the outbox's grace
    early = reconcile()
    # THEN no Run Completed: the retried item's final outcome has not reached the bus yet
    assert [e["detail-type"] for e in early] == [], early
    # WHEN it runs once the grace has passed
    clock.advance(ReconcilerSettings().outbox_grace_seconds + 1)
    late = reconcile()
    # THEN the retry's Job Stored came, then the run's one Run Completed
    order = [(e["detail-type"], e["detail"].get("job_id")) for e in late]
    assert order == [("Job Stored", retry), ("Run Completed", None)], order


def test_an_open_run_reads_no_batch_manifest_past_its_first_open_entry(
    world: World, client: GeonodeClient, clock: ManualClock
):
    # GIVEN a batch run of two batches: the first still running, the second stored
    urls = [f"https://example.com/run-open/{i}" for i in range(2)]
    submitter = Submitter(
        world.journal, client, clock=clock, pace=Pace(clock), rng=random.Random(9)
    )
    report = submitter.submit(RunSpec.of(urls, RunMode.BATCH, batch_size=1), "open-first")
    second = report.entries[1].job_id or ""
    items = [{"index": 0, "url": urls[1], "status": "stored", "keys": []}]
    key = manifest_key(JobKind.BATCH, second)
    world.s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps({"items": items}).encode())
    _settle(world, JobKind.BATCH, second, Outcome.STORED, urls[1])
    reads: list[str] = []
    world.s3.meta.events.register(
        "before-parameter-build.s3.GetObject", lambda params, **_: reads.append(params["Key"])
    )
    # WHEN the run sweep runs every minute for three minutes
    for _ in range(3):
        world.run_sweep()
        clock.advance(60)
    # THEN the run stays open, and the stored batch's manifest was never read: the sweep
    # stops at the first open entry, whose batch is not stored
    assert _run_completed(world) == []
    assert key not in reads, reads
