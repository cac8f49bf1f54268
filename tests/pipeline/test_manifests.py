"""Batch and crawl manifests: written last, once, only when every item is stored or parked.

``results/<kind>/<job id>/manifest.json`` must list every item exactly once, however many
invocations (cut by their deadline, killed, crashed between a part and its checkpoint) stored
the pages; it must not exist while an item is pending; a crash between it and the ledger's
DONE keeps one version. Judged from S3's objects and versions (moto over boto3) and the
simulator's record over HTTP; the processor's deadline runs on a fake clock spent by S3 writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.processor.deadline import Deadline
from scrape_pipeline.processor.manifest import PARTS_PREFIX, ItemStatus, manifest_key
from scrape_pipeline.processor.processing import JobProcessor
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_ops.submissions import expect
from tests.pipeline.conftest import MakeStack, truth, versions
from tests.pipeline.direct import NO_RECONCILER
from tests.pipeline.test_big_jobs import LEASE_SECONDS, Killed, gets, ledger, processor

QUIET = StackSettings(webhooks=False, reconcile_interval=NO_RECONCILER)
SIM_KIND = {"crawl": "crawl_page", "batch": "batch_item"}


class Invocations:
    """Invocations whose remaining time only the items' S3 writes spend (1 s each)."""

    def __init__(self, job_processor: JobProcessor) -> None:
        self.left = 0.0
        self.count = 0
        results = job_processor._results
        for name in ("store", "dead_letter"):
            real = getattr(results, name)
            setattr(results, name, self._spending(real))

    def _spending(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def spend(*args: Any, **kwargs: Any) -> Any:
            self.left -= 1.0
            return real(*args, **kwargs)

        return spend

    def start(self, length: float) -> Deadline:
        """A fresh invocation of ``length`` seconds with a 10 s stop margin."""
        self.count += 1
        self.left = length
        return Deadline.of_invocation(lambda: self.left, 10.0)


def s3_keys(stack: LocalStack) -> set[str]:
    return set(versions(stack))


def read_manifest(stack: LocalStack, kind: JobKind, job_id: str) -> dict[str, Any]:
    assert stack.resources is not None
    body = boto3.client("s3").get_object(
        Bucket=stack.resources.bucket, Key=manifest_key(kind, job_id)
    )["Body"]
    manifest: dict[str, Any] = json.loads(body.read())
    return manifest


def settled(stack: LocalStack, kind: str, job_id: str) -> Callable[[], bool]:
    def done() -> bool:
        items = [j for j in truth(stack, SIM_KIND[kind]) if j["job_id"] == job_id]
        return bool(items) and all(j["status"] == j["final_status"] for j in items)

    return done


def check_manifest_matches_s3(
    stack: LocalStack, kind: JobKind, job_id: str, manifest: dict[str, Any]
) -> None:
    """Every item the simulator has appears once, with its URL and status, and with keys
    that exist; the counts are S3's objects."""
    seen = versions(stack)
    items = manifest["items"]
    sim = {int(j["index"]): j for j in truth(stack, SIM_KIND[kind.value]) if j["job_id"] == job_id}
    assert [i["index"] for i in items] == sorted(sim), "each item exactly once, in order"
    prefix = f"results/{kind.value}/{job_id}/"
    metadata = [k for k in seen if k.startswith(prefix) and k.endswith("/metadata.json")]
    dead = [k for k in seen if k.startswith(f"dead-letters/{kind.value}/{job_id}/")]
    counts = manifest["counts"]
    assert counts["stored"] == len(metadata)
    assert counts["dead_lettered"] == len(dead)
    finals = [s for s in ItemStatus if s is not ItemStatus.RETRYING]  # never in a manifest
    assert counts["total"] == len(sim) == sum(counts[s.value] for s in finals)
    for item in items:
        truth_item = sim[item["index"]]
        assert item["url"] == truth_item["url"]
        expected = {"completed": "stored", "failed": "dead_lettered", "cancelled": "cancelled"}
        assert item["status"] == expected[truth_item["status"]], item
        assert set(item["keys"]) <= set(seen), item
        if item["status"] == "stored":
            assert f"{prefix}{item['index']:05d}/metadata.json" in item["keys"]
        elif item["status"] == "dead_lettered":
            assert item["keys"] == [f"dead-letters/{kind.value}/{job_id}/{item['index']:05d}.json"]
            assert item["reason"] == truth_item["error_code"]
        else:
            assert item["keys"] == []
    assert manifest["tokens_total"] == manifest["api_tokens_charged_total"]
    assert (manifest["kind"], manifest["job_id"]) == (kind.value, job_id)


def test_batch_stored_over_many_cut_and_crashed_invocations_gets_one_complete_manifest(
    make_stack: MakeStack,
):
    # GIVEN a settled 120-URL batch (pages of 50, 50, 20), some items failed for good,
    # invocations of 40 s whose items take 1 s each to store (10 s margin: about 30 items
    # an invocation), and one attempt that dies between a part and its checkpoint
    stack = make_stack(QUIET, permanent_failure_rate=0.2)
    urls = [f"https://example.com/manifest/{i}" for i in range(120)]
    batch_id = stack.client().create_batch(urls).job_id
    stack.run_until(settled(stack, "batch", batch_id), step=10.0, limit=1800)
    job_processor = processor(stack)
    invocations = Invocations(job_processor)
    books = job_processor._ledger
    real_checkpoint = books.checkpoint
    crashes: list[int] = []

    def checkpoint(*args: Any, **kwargs: Any) -> Any:
        # The first stop inside a page after the first invocation: a range a retry redoes.
        if invocations.count >= 2 and kwargs.get("next_item") and not crashes:
            crashes.append(invocations.count)
            raise Killed  # the part is written, the checkpoint is not
        return real_checkpoint(*args, **kwargs)

    books.checkpoint = checkpoint  # type: ignore[method-assign]
    message = JobMessage(JobKey(JobKind.BATCH, batch_id), "test")
    where = manifest_key(JobKind.BATCH, batch_id)

    # WHEN invocations process it until it is stored; the one after the crash is longer, so
    # it stores a longer range from the same item than the dead one's part
    outcomes: list[str] = []
    while not outcomes or outcomes[-1] != "stored":
        assert len(outcomes) < 15, outcomes
        length = 60.0 if crashes and len(outcomes) == crashes[0] else 40.0
        try:
            disposition = job_processor.process(message, deadline=invocations.start(length))
            outcomes.append(disposition.outcome)
        except Killed:
            outcomes.append("killed")
            stack.clock.advance(LEASE_SECONDS + 1)
        if outcomes[-1] != "stored":
            # THEN (each time) no manifest while the batch is not all stored
            assert where not in s3_keys(stack), outcomes

    # THEN one manifest, written once, lists each of the 120 items once with its status,
    # keys and reason, its counts S3's own, after 3 or more invocations
    assert len([o for o in outcomes if o == "in_progress"]) >= 3, outcomes
    assert crashes and "killed" in outcomes
    seen = versions(stack)
    assert seen[where] == 1
    assert max(seen.values()) == 1
    # The parts are one chain, no overlap: the retry after the crash stored page 2 whole,
    # found the dead attempt's part of items 0-30 and wrote only 31-49 beside it
    prefix = f"{PARTS_PREFIX}/batch/{batch_id}/"
    parts = sorted(k.removeprefix(prefix) for k in seen if k.startswith(prefix))
    assert parts == [
        f"{p}.json" for p in ("00001-000", "00001-031", "00002-000", "00002-031", "00003-000")
    ]
    manifest = read_manifest(stack, JobKind.BATCH, batch_id)
    check_manifest_matches_s3(stack, JobKind.BATCH, batch_id, manifest)
    assert manifest["counts"]["total"] == 120 and manifest["counts"]["dead_lettered"] > 0
    assert manifest["status"] == "completed" and manifest["created_at"]
    row = ledger(stack).get(message.key)
    assert row is not None and row.outcome is Outcome.STORED
    assert row.detail["manifest"] == where


def test_crash_between_manifest_and_done_keeps_one_manifest_and_reaches_done(
    make_stack: MakeStack,
):
    # GIVEN a settled 60-URL batch and a processor that dies once right after the manifest,
    # before the ledger's DONE
    stack = make_stack(QUIET)
    batch_id = stack.client().create_batch([f"https://example.com/m/{i}" for i in range(60)])
    stack.run_until(settled(stack, "batch", batch_id.job_id), step=10.0, limit=1800)
    job_processor = processor(stack)
    real_finish = job_processor._ledger.finish
    where = manifest_key(JobKind.BATCH, batch_id.job_id)
    at_finish: list[bool] = []

    def finish(*args: Any, **kwargs: Any) -> Any:
        at_finish.append(where in s3_keys(stack))
        if len(at_finish) == 1:
            raise Killed
        return real_finish(*args, **kwargs)

    job_processor._ledger.finish = finish  # type: ignore[method-assign]
    message = JobMessage(JobKey(JobKind.BATCH, batch_id.job_id), "test")

    # WHEN it processes the batch, dies, and the retry takes the lease once it expires
    with pytest.raises(Killed):
        job_processor.process(message)
    stack.clock.advance(LEASE_SECONDS + 1)
    outcome = job_processor.process(message)

    # THEN the manifest existed before each DONE write, the retry reached DONE, and the
    # manifest has one version
    assert at_finish == [True, True]
    assert outcome.outcome == "stored"
    seen = versions(stack)
    assert seen[where] == 1 and max(seen.values()) == 1
    check_manifest_matches_s3(
        stack, JobKind.BATCH, batch_id.job_id, read_manifest(stack, JobKind.BATCH, batch_id.job_id)
    )
    row = ledger(stack).get(message.key)
    assert row is not None and row.outcome is Outcome.STORED


def test_cancelled_crawl_gets_its_manifest_only_after_its_in_flight_pages_drain(
    make_stack: MakeStack,
):
    # GIVEN a 40-page crawl, 4 pages in flight at a time (60-70 s each), cancelled while
    # pages run, the pipeline processing it through SQS as soon as the API says cancelled
    stack = make_stack(QUIET, crawl_page_duration_min_s=60, crawl_page_duration_max_s=70)
    client = stack.client()
    crawl_id = client.create_crawl("https://example.com/cancel-manifest", max_pages=40).job_id
    stack.step(75.0)
    client.cancel_crawl(crawl_id)
    in_flight = [
        j
        for j in truth(stack, "crawl_page")
        if j["job_id"] == crawl_id and j["status"] == "processing"
    ]
    assert in_flight, "nothing was in flight at the cancel"
    drained_at = max(float(j["settled_at"]) for j in in_flight)
    assert stack.resources is not None
    key = JobKey(JobKind.CRAWL, crawl_id)
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    where = manifest_key(JobKind.CRAWL, crawl_id)
    books = ledger(stack)
    expect(books, JobKind.CRAWL, crawl_id)

    # WHEN the processor sees it while pages are still in flight
    queue.send(JobMessage(key, "test"))
    stack.run_until(lambda: stack.clock.time() >= drained_at - 5.0, step=5.0, limit=600)

    # THEN it read the crawl, yet wrote no manifest, and the row is not DONE
    assert gets(stack, "crawl") > 0
    assert where not in s3_keys(stack)
    row = books.get(key)
    assert row is None or not row.is_done

    # WHEN the pages drain and the processor looks again
    stack.run_until(lambda: stack.clock.time() > drained_at, step=5.0, limit=600)
    queue.send(JobMessage(key, "test"))

    def closed() -> bool:
        done = books.get(key)
        return done is not None and done.is_done

    stack.run_until(closed, step=5.0, limit=1800)

    # THEN the manifest lists the drained pages stored and the cancelled ones as cancelled
    manifest = read_manifest(stack, JobKind.CRAWL, crawl_id)
    check_manifest_matches_s3(stack, JobKind.CRAWL, crawl_id, manifest)
    assert manifest["status"] == "cancelled"
    assert manifest["counts"]["cancelled"] > 0 and manifest["counts"]["stored"] > 0
    statuses = {i["index"]: i["status"] for i in manifest["items"]}
    assert all(statuses[int(j["index"])] == "stored" for j in in_flight)
    row = books.get(key)
    assert row is not None and row.outcome is Outcome.CANCELLED
    assert versions(stack)[where] == 1


def test_a_page_cut_by_the_deadline_never_moves_past_an_item_still_in_flight(
    make_stack: MakeStack,
):
    # GIVEN a 50-URL batch cancelled while some items run, among completed ones
    stack = make_stack(QUIET, job_duration_min_s=20, job_duration_max_s=120)
    urls = [f"https://example.com/cut/{i}" for i in range(50)]
    batch_id = stack.client().create_batch(urls).job_id
    stack.step(60.0)
    stack.sim.cancel_batch(batch_id)
    items = sorted(
        (j for j in truth(stack, "batch_item") if j["job_id"] == batch_id),
        key=lambda j: int(j["index"]),
    )
    in_flight = [int(j["index"]) for j in items if j["status"] == "processing"]
    completed = [int(j["index"]) for j in items if j["status"] == "completed"]
    assert in_flight and len(completed) > 6 and in_flight[0] < completed[5], (in_flight, completed)
    job_processor = processor(stack)
    invocations = Invocations(job_processor)
    message = JobMessage(JobKey(JobKind.BATCH, batch_id), "test")

    # WHEN an invocation with time for about 5 stores processes it before the drain
    first = job_processor.process(message, deadline=invocations.start(20.0))

    # THEN it stopped without a manifest, its checkpoint still before the running item
    assert first.outcome == "in_progress"
    row = ledger(stack).get(message.key)
    assert row is not None and (row.next_page, row.next_item) == (1, 0)
    assert manifest_key(JobKind.BATCH, batch_id) not in s3_keys(stack)

    # WHEN the items drain and invocations go on until it is closed
    stack.run_until(settled(stack, "batch", batch_id), step=10.0, limit=600)
    outcomes = [first.outcome]
    while outcomes[-1] == "in_progress":
        assert len(outcomes) < 20, outcomes
        outcomes.append(job_processor.process(message, deadline=invocations.start(20.0)).outcome)

    # THEN the items that were running are in the manifest, stored
    assert outcomes[-1] == "cancelled", outcomes
    manifest = read_manifest(stack, JobKind.BATCH, batch_id)
    check_manifest_matches_s3(stack, JobKind.BATCH, batch_id, manifest)
    statuses = {i["index"]: i["status"] for i in manifest["items"]}
    assert {statuses[i] for i in in_flight} <= {"stored", "dead_lettered"}


def test_a_1000_item_batch_manifest_costs_no_api_call_and_21_puts_20_gets(make_stack: MakeStack):
    # GIVEN a settled 1,000-URL batch (20 pages of 50), S3's manifest calls counted
    stack = make_stack(QUIET)
    urls = [f"https://example.com/thousand/{i}" for i in range(1000)]
    batch_id = stack.client().create_batch(urls).job_id
    stack.run_until(settled(stack, "batch", batch_id), step=10.0, limit=1800)
    job_processor = processor(stack)
    requests: list[tuple[str, str]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        requests.append((model.name, str(params.get("Key", ""))))

    job_processor._results._s3.meta.events.register("provide-client-params.s3.*", record)

    # WHEN one invocation stores it
    outcome = job_processor.process(JobMessage(JobKey(JobKind.BATCH, batch_id), "test"))

    # THEN one GET a page, as without a manifest; 20 parts and the manifest put, 20 parts read
    assert outcome.outcome == "stored"
    assert gets(stack, "batch") == 20
    manifest_requests = [
        op for op, key in requests if key.startswith(PARTS_PREFIX) or key.endswith("manifest.json")
    ]
    assert manifest_requests.count("PutObject") == 21
    assert manifest_requests.count("GetObject") == 20
    assert len(manifest_requests) == 41  # no list call
    assert len(requests) - 41 == 2000  # the items' own content.md and metadata.json
    manifest = read_manifest(stack, JobKind.BATCH, batch_id)
    check_manifest_matches_s3(stack, JobKind.BATCH, batch_id, manifest)
