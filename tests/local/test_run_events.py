"""A run on the local stack, end to end: its file uploaded to ``submissions/``, its jobs posted
by the submitter function, stored by the processor, and the run completed by the reconciler's
run sweep: every job event names the run, and one ``Run Completed`` names its manifest.

Judged where a user would look: a rule with an SQS target on the stack's bus (events by
``event_id``), the manifest read from the results bucket with boto3, the simulator's record.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.events.bus_fixture import subscribe
from tests.pipeline.conftest import QUIET, all_settled_and_done, truth, versions

URLS = 12
RUN = "local-nightly"


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(ManualClock(), SimConfig(**QUIET)).start()
    stack.handlers["submitter"].logger.setLevel("WARNING")
    stack.settle_now()  # S3's test event, sent when the notification was configured
    yield stack
    stack.stop()


def _manifest(stack: LocalStack, run: str = RUN) -> dict[str, Any] | None:
    assert stack.resources is not None
    s3 = boto3.client("s3")
    try:
        body = s3.get_object(Bucket=stack.resources.bucket, Key=f"runs/{run}/manifest.json")
    except s3.exceptions.NoSuchKey:
        return None
    return dict(json.loads(body["Body"].read()))


def test_a_runs_job_events_name_it_and_its_completion_is_told_once(stack: LocalStack) -> None:
    # GIVEN a subscriber on the stack's bus, and a run file of 12 URLs uploaded
    assert stack.resources is not None and stack.resources.event_bus
    subscriber = subscribe(boto3.client("events"), boto3.client("sqs"), stack.resources.event_bus)
    urls = [f"https://example.com/run-events/{i}" for i in range(URLS)]
    s3 = boto3.client("s3")
    body = ("\n".join(urls) + "\n").encode()
    s3.put_object(Bucket=stack.resources.bucket, Key=f"submissions/{RUN}.txt", Body=body)
    # WHEN every job is stored, and the reconciler runs on its schedule past that
    stack.run_until(all_settled_and_done(stack, URLS), step=1.0, limit=900)
    stack.settle_now()
    until = stack.clock.time() + 2 * 60.0 + 1.0  # two reconciler intervals (its schedule)
    stack.run_until(lambda: stack.clock.time() >= until, step=10.0)
    stack.settle_now()
    received = subscriber.received()
    # THEN each URL was posted once, and each job's one event names the run
    assert sorted(stack.sim.submissions().get(u, 0) for u in urls) == [1] * URLS
    jobs = [e["detail"] for e in received if e["detail-type"] == "Job Stored"]
    assert sorted(j["url"] for j in jobs) == sorted(urls)
    assert {j["run"] for j in jobs} == {RUN}
    assert list(Counter(j["event_id"] for j in jobs).values()) == [1] * URLS
    # AND one Run Completed came, naming the manifest, which lists every URL's job and keys
    [done] = [e for e in received if e["detail-type"] == "Run Completed"]
    assert done["source"] == "scrape-pipeline"
    detail = done["detail"]
    assert (detail["run"], detail["bucket"]) == (RUN, stack.resources.bucket)
    assert detail["manifest_key"] == f"runs/{RUN}/manifest.json"
    assert detail["counts"] == {"urls": URLS, "jobs": URLS, "stored": URLS}
    # within one reconciler interval of its last job's DONE (the schedule: a minute)
    lag = detail["completed_at"] - max(j["stored_at"] for j in jobs)
    print(f"Run Completed {lag:.1f} s after the run's last job was stored")
    assert 0 <= lag <= 60.0 + 1.0
    manifest = _manifest(stack)
    assert manifest is not None and manifest["counts"] == detail["counts"]
    ids = {j["url"]: j["job_id"] for j in truth(stack)}
    for row in manifest["urls"]:
        assert row["job_id"] == ids[row["url"]] and row["outcome"] == "stored"
        assert f"results/extract/{row['job_id']}/metadata.json" in row["keys"]


def test_a_batch_runs_manifest_names_each_urls_item_and_keys(stack: LocalStack) -> None:
    # GIVEN a batch run of 10 URLs in batches of 4 (three batch jobs), its options first
    assert stack.resources is not None and stack.resources.event_bus
    subscriber = subscribe(boto3.client("events"), boto3.client("sqs"), stack.resources.event_bus)
    urls = [f"https://example.com/run-batch/{i}" for i in range(10)]
    s3 = boto3.client("s3")
    bucket = stack.resources.bucket
    options = b'{"mode": "batch", "batch_size": 4}'
    s3.put_object(Bucket=bucket, Key="submissions/local-batches.json", Body=options)
    body = ("\n".join(urls) + "\n").encode()
    s3.put_object(Bucket=bucket, Key="submissions/local-batches.txt", Body=body)
    # WHEN its batches are stored and the reconciler runs on its schedule past that
    stack.run_until(lambda: _batches_stored(stack, 3), step=1.0, limit=900)
    until = stack.clock.time() + 2 * 60.0 + 1.0
    stack.run_until(lambda: stack.clock.time() >= until, step=10.0)
    stack.settle_now()
    # THEN one Run Completed came, and its manifest gives each URL its item's keys
    done = [e for e in subscriber.received() if e["detail-type"] == "Run Completed"]
    assert [e["detail"]["run"] for e in done] == ["local-batches"]
    assert done[0]["detail"]["counts"] == {"urls": 10, "jobs": 3, "stored": 10}
    found = s3.get_object(Bucket=bucket, Key="runs/local-batches/manifest.json")["Body"]
    manifest = json.loads(found.read())
    assert sorted(u["url"] for u in manifest["urls"]) == sorted(urls)
    for row in manifest["urls"]:
        prefix = f"results/batch/{row['job_id']}/{row['item']:05d}/"
        assert row["outcome"] == "stored" and row["keys"]
        assert all(k.startswith(prefix) for k in row["keys"])


def _batches_stored(stack: LocalStack, expected: int) -> bool:
    """``expected`` batch jobs settled, each with its manifest in the bucket."""
    assert stack.resources is not None
    batches = {j["job_id"] for j in stack.sim.truth_jobs("batch_item")}
    if len(batches) < expected:
        return False
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=stack.resources.bucket, Prefix="results/batch/")
    keys = {o["Key"] for o in listed.get("Contents", [])}
    return all(f"results/batch/{b}/manifest.json" in keys for b in batches)


CHAIN_URLS = 6
CHAIN_RUN = "local-chains"


def _chains(stack: LocalStack, urls: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each URL's jobs in the simulator's record, oldest first: its chain of resubmissions."""
    jobs = sorted(truth(stack), key=lambda j: j["created_at"])
    return {url: [j for j in jobs if j["url"] == url] for url in urls}


def _chains_ended(stack: LocalStack, urls: list[str], limit: int) -> bool:
    """Every URL's last job settled with its outcome in S3, and not one the pipeline would
    resubmit (a retryable failure within the chain's budget)."""
    seen = versions(stack)
    for chain in _chains(stack, urls).values():
        if not chain or chain[-1]["status"] in ("queued", "processing"):
            return False
        last = chain[-1]
        if last["status"] == "failed" and last["retryable"] and len(chain) <= limit:
            return False
        stored = f"results/extract/{last['job_id']}/metadata.json"
        if stored not in seen and f"dead-letters/extract/{last['job_id']}.json" not in seen:
            return False
    return True


def test_a_run_follows_each_urls_chain_of_resubmissions_to_its_final_job() -> None:
    # GIVEN a run of 6 URLs whose jobs fail retryably half the time (each failure
    # resubmitted, up to 3 times a URL), and a subscriber on the stack's bus
    limit = 3
    settings = StackSettings(env={"MAX_RESUBMISSIONS_PER_URL": str(limit)})
    stack = LocalStack(
        ManualClock(), SimConfig(**{**QUIET, "retryable_failure_rate": 0.5}), settings
    ).start()
    try:
        stack.handlers["submitter"].logger.setLevel("WARNING")
        stack.settle_now()
        assert stack.resources is not None and stack.resources.event_bus
        bus = stack.resources.event_bus
        subscriber = subscribe(boto3.client("events"), boto3.client("sqs"), bus)
        urls = [f"https://example.com/run-chains/{i}" for i in range(CHAIN_URLS)]
        s3 = boto3.client("s3")
        body = ("\n".join(urls) + "\n").encode()
        s3.put_object(Bucket=stack.resources.bucket, Key=f"submissions/{CHAIN_RUN}.txt", Body=body)
        # WHEN every URL's chain has ended, and the reconciler runs on its schedule past that
        received: list[dict[str, Any]] = []

        def ended() -> bool:
            received.extend(subscriber.received())  # in the order the bus delivered them
            return _chains_ended(stack, urls, limit)

        stack.run_until(ended, step=1.0, limit=1800)
        stack.settle_now()
        until = stack.clock.time() + 2 * 60.0 + 1.0
        stack.run_until(lambda: stack.clock.time() >= until, step=10.0)
        stack.settle_now()
        received.extend(subscriber.received())
        chains = _chains(stack, urls)
        # (the seed makes some URL's first job fail and its resubmission carry on)
        assert any(len(chain) > 1 for chain in chains.values()), chains
        finals = {url: chain[-1] for url, chain in chains.items()}
        # THEN each final job's one outcome event names the run, and came before Run Completed
        outcome_types = ("Job Stored", "Job Dead-Lettered")
        order = [e["detail"].get("job_id") or e["detail-type"] for e in received]
        [completed] = [i for i, e in enumerate(received) if e["detail-type"] == "Run Completed"]
        by_job = {e["detail"]["job_id"]: e for e in received if e["detail-type"] in outcome_types}
        for url, final in finals.items():
            event = by_job.get(final["job_id"])
            assert event is not None, f"{url}: no event for its final job {final['job_id']}"
            assert event["detail"].get("run") == CHAIN_RUN, (url, event["detail"])
            assert order.index(final["job_id"]) < completed, (url, order)
        done = received[completed]["detail"]
        settled = [by_job[f["job_id"]]["detail"]["settled_at"] for f in finals.values()]
        chained = sum(len(chain) > 1 for chain in chains.values())
        print(f"{chained} of {CHAIN_URLS} URLs resubmitted; Run Completed ", end="")
        print(f"{done['completed_at'] - max(settled):.1f} s after the last final job settled")
        # AND the run's manifest gives each URL its final job, its outcome and keys in S3
        manifest = _manifest(stack, CHAIN_RUN)
        assert manifest is not None
        in_s3 = versions(stack)
        by_url = {row["url"]: row for row in manifest["urls"]}
        for url, final in finals.items():
            row = by_url[url]
            stored = final["status"] == "completed"
            assert row["job_id"] == final["job_id"], (url, row, chains[url])
            assert row["outcome"] == ("stored" if stored else "dead_lettered"), row
            assert row["keys"] and all(k in in_s3 for k in row["keys"]), row
        assert manifest["counts"]["jobs"] == sum(len(chain) for chain in chains.values())
    finally:
        stack.stop()
