"""Issue 35 item 4, the processor's side: a resubmission or an item retry whose holder died
after its POST adopts only the job that POST made, never a run's job of the same URL nor one
posted with other options. Judged from the simulator's record of jobs and POSTs; the ledger
(moto on 127.0.0.1) and the API (the simulator over HTTP) are the real ones."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.listing_lag import ListingLag
from scrape_pipeline.geonode.settings import LISTING_LAG_FLOOR
from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.deadline import Attempt
from scrape_pipeline.processor.resubmission import Resubmitter, RetryRef, formats_of, hand_on
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec, post_options
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer

URL = "https://example.com/adopt/processor"
LAG = LISTING_LAG_FLOOR.default  # the listing lag allowed for: no reconciler measured one


@pytest.fixture
def ledger(table: tuple[str, str], clock: ManualClock) -> Iterator[Ledger]:
    endpoint, name = table
    yield Ledger(name, client=boto3.client("dynamodb", endpoint_url=endpoint), clock=clock)


def resubmitter(client: GeonodeClient, ledger: Ledger, clock: ManualClock) -> Resubmitter:
    return Resubmitter(client, ledger, per_chain_limit=2, lag=ListingLag(None, clock=clock))


def dead_holder_posts(ledger: Ledger, job_id: str) -> JobKey:
    """A first holder of the failed job's lease noted its resubmission POST, then died."""
    key = JobKey(JobKind.EXTRACT, job_id)
    ledger.acquire(key, "dead", 120, source="webhook")
    ledger.note_posting(key, "dead", posting=True)
    return key


def next_holder(ledger: Ledger, key: JobKey) -> Attempt:
    """The failed job's lease as its next holder takes it (the dead one's ran out)."""
    lease = ledger.acquire(key, "next", 120, source="webhook")
    assert lease.granted and lease.row is not None
    return Attempt(key, "next", lease.row)


def created(server: SimulatorServer) -> dict[str, dict[str, Any]]:
    """The simulator's own record: every extract job of URL, by id."""
    return {j["job_id"]: j for j in server.sim.truth_jobs("extract") if j["url"] == URL}


def a_runs_job(
    client: GeonodeClient, ledger: Ledger, clock: ManualClock, formats: list[str]
) -> str:
    """Run ``run-a`` posts URL through the stack's journal: its ledger row names the run."""
    journal = DynamoJournal(ledger.table_name, client=ledger.client)
    spec = RunSpec.of([URL], RunMode.ASYNC, post_options(formats, False))
    report = Submitter(journal, client, clock=clock, pace=Pace(clock), rng=random.Random(3)).submit(
        spec, "run-a"
    )
    [job_id] = [e.job_id for e in report.entries]
    assert job_id is not None
    row = ledger.get(JobKey(JobKind.EXTRACT, job_id))
    assert row is not None and row.run == "run-a"
    return job_id


@pytest.mark.parametrize("other", ["a run's job", "other formats"])
def test_a_resubmission_never_adopts_a_runs_job_or_one_of_other_formats(
    server: SimulatorServer,
    client: GeonodeClient,
    ledger: Ledger,
    clock: ManualClock,
    other: str,
):
    # GIVEN a failed markdown job of URL, whose earlier holder may have resubmitted it
    failed = client.submit_extract(URL, formats=["markdown"]).job_id
    clock.advance(10)
    # AND, the newest job of URL since, one that is not its resubmission
    if other == "a run's job":
        foreign = a_runs_job(client, ledger, clock, ["markdown"])
    else:
        foreign = client.submit_extract(URL, formats=["html"]).job_id
    clock.advance(10)
    # WHEN its next holder resubmits it, once the job list covers the dead holder's POST
    key = dead_holder_posts(ledger, failed)
    clock.advance(LAG)
    found = resubmitter(client, ledger, clock).resubmit(
        client.get_job(failed), next_holder(ledger, key)
    )
    # THEN it posted a new markdown job: the other one is left to its owner
    assert found is not None and found[DETAIL_RESUBMITTED_AS] != foreign, f"adopted {other}"
    jobs = created(server)
    assert found["adopted"] == "false"
    assert jobs[found[DETAIL_RESUBMITTED_AS]]["formats"] == ["markdown"]
    assert len(jobs) == 3


def test_a_resubmission_adopts_the_job_its_dead_holder_posted_not_a_later_runs(
    server: SimulatorServer, client: GeonodeClient, ledger: Ledger, clock: ManualClock
):
    # GIVEN a failed job, the resubmission its dead holder posted, then a run's job of URL
    failed = client.submit_extract(URL, formats=["markdown"]).job_id
    clock.advance(5)
    key = dead_holder_posts(ledger, failed)
    posted = client.submit_extract(URL, formats=["markdown"]).job_id
    clock.advance(5)
    a_runs_job(client, ledger, clock, ["markdown"])
    clock.advance(LAG)  # every job listed, the dead holder's POST covered
    # WHEN the next holder resubmits the failed job
    found = resubmitter(client, ledger, clock).resubmit(
        client.get_job(failed), next_holder(ledger, key)
    )
    # THEN it adopted the dead holder's job, and posted nothing
    assert found == {DETAIL_RESUBMITTED_AS: posted, "adopted": "true"}
    assert server.sim.submissions()[URL] == 3


def test_an_item_retry_adopts_the_job_its_dead_holder_posted_not_a_later_runs(
    server: SimulatorServer, client: GeonodeClient, ledger: Ledger, clock: ManualClock
):
    # GIVEN a batch whose holder noted item 0's retry posting, posted it and died
    batch = client.create_batch([URL, "https://example.com/adopt/other"]).job_id
    key = JobKey(JobKind.BATCH, batch)
    ledger.acquire(key, "dead", 120, source="webhook")
    ledger.note_item_retry(key, "dead", 0, posting=True)
    status = client.get_batch(batch)
    clock.advance(5)
    posted = client.submit_extract(URL, formats=formats_of(status)).job_id
    clock.advance(5)
    # AND then a run posted the same URL with the same formats
    a_runs_job(client, ledger, clock, list(formats_of(status)))
    # WHEN the next holder (its lease taken once the dead one's ran out) retries item 0
    clock.advance(LAG)  # and the job list covers the dead holder's POST
    lease = ledger.acquire(key, "next", 120, source="webhook")
    assert lease.granted and lease.row is not None
    [item] = [i for i in client.iter_batch_items(batch) if i.url == URL]
    retrier = resubmitter(client, ledger, clock)
    ref = RetryRef(key, 0)
    job_id = retrier.retry_item(
        ref, item, status=status, attempt=Attempt(key, "next", lease.row), noted={}
    )
    # THEN it adopted the dead holder's job, never the run's, and posted nothing
    assert job_id == posted, "adopted the run's job"
    assert server.sim.submissions()[URL] == 3


def test_a_runs_resubmission_adopts_the_job_its_dead_holder_handed_the_run_on_to(
    server: SimulatorServer, client: GeonodeClient, ledger: Ledger, clock: ManualClock
):
    # GIVEN a run's job that failed, whose holder posted its resubmission, handed the run on
    # to it (the new row names the run) and died before closing the failed row
    failed = a_runs_job(client, ledger, clock, ["markdown"])
    key = JobKey(JobKind.EXTRACT, failed)
    lease = ledger.acquire(key, "dead", 120, source="webhook")
    assert lease.granted and lease.row is not None
    clock.advance(5)
    ledger.note_posting(key, "dead", posting=True)
    posted = client.submit_extract(URL, formats=["markdown"]).job_id
    hand_on(ledger, lease.row, "dead", posted)
    handed = ledger.get(JobKey(JobKind.EXTRACT, posted))
    assert handed is not None and handed.run == "run-a"
    clock.advance(LAG)  # every job listed, the dead holder's lease run out and POST covered
    # WHEN the next holder resubmits the failed job
    found = resubmitter(client, ledger, clock).resubmit(
        client.get_job(failed), next_holder(ledger, key)
    )
    # THEN it adopted the job the run was handed on to, and posted nothing
    assert found == {DETAIL_RESUBMITTED_AS: posted, "adopted": "true"}
    assert server.sim.submissions()[URL] == 2
