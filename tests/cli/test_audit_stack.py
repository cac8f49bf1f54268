"""``audit`` and ``results get`` on the local stack: the real processor stored the results
(webhooks, queue, processor, the ledger's journal), so the audit reads the layout it writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import result_prefix
from scrape_pipeline_local.stack import LocalStack
from tests.cli.conftest import Cli, own_stack
from tests.cli.test_cli_runs import _file


def test_audit_on_the_local_stack_agrees_with_the_processor(
    live: LocalStack, cli: Cli, tmp_path: Path
):
    assert live.resources is not None
    since = format_time(live.clock.time() - 60.0)
    # GIVEN an async run and a batch run, settled and stored by the pipeline
    extracts, urls = _file(tmp_path, "audit-stack-async", 3)
    batch, _ = _file(tmp_path, "audit-stack-batch", 3)
    for path, mode, name in ((extracts, "async", "audit-a"), (batch, "batch", "audit-b")):
        submitted = cli(
            "submit", str(path), "--mode", mode, "--run", name, "--json", clock=live.clock
        )
        assert submitted.code == 0, submitted.err
    for _ in range(25):
        live.step(1.0)
    # WHEN the window and each run are audited
    whole = cli("audit", "--since", since, "--json", clock=live.clock)
    run_a = cli("audit", "--since", since, "--run", "audit-a", "--json", clock=live.clock)
    run_b = cli("audit", "--since", since, "--run", "audit-b", "--json", clock=live.clock)
    # THEN every extract and every batch item (from the ledger and the journal) is stored once
    assert whole.code == 0, whole.err
    assert (whole.record()["jobs"], whole.record()["stored"]) == (6, 6)
    assert (run_a.record()["jobs"], run_a.record()["stored"]) == (3, 3)
    assert (run_b.record()["jobs"], run_b.record()["stored"]) == (3, 3)
    # AND results get finds a URL's result through the journal in the ledger table
    found = cli("results", "get", urls[0], "--json", clock=live.clock)
    assert found.code == 0, found.err
    job_id = found.record()["job_id"]
    # AND once its metadata.json is deleted, the audit names it missing: exit 1
    key = f"{result_prefix(JobKind.EXTRACT, job_id)}/metadata.json"
    boto3.client("s3").delete_object(Bucket=live.resources.bucket, Key=key)
    after = cli("audit", "--since", since, "--run", "audit-a", "--json", clock=live.clock)
    assert after.code == 1 and f"missing: extract {job_id}" in after.err, after.err


@pytest.fixture
def lagging() -> Iterator[LocalStack]:
    """A stack of its own whose API lists each job four minutes after its creation."""
    with own_stack(listing_lag_min_s=240.0, listing_lag_max_s=260.0) as stack:
        yield stack


def test_audit_judges_the_jobs_the_api_lists_late_from_their_own_get(lagging: LocalStack, cli: Cli):
    since = lagging.clock.time() - 60.0
    # GIVEN three jobs stored by the pipeline (webhooks, queue, processor) within a minute of
    # their creation, which the job list does not show yet
    client = lagging.client()
    jobs = [client.submit_extract(f"https://example.com/late/{i}").job_id for i in range(3)]
    for _ in range(60):
        lagging.step(1.0)
    listed = client.list_jobs(start_date=since, end_date=lagging.clock.time(), page_size=100)
    assert not listed.items
    # WHEN the window is audited
    result = cli("audit", "--since", format_time(since), "--json", clock=lagging.clock)
    # THEN each is judged from its own GET (the ledger names it) and S3: stored once, exit 0
    assert result.code == 0, result.err
    record = result.record()
    assert (record["jobs"], record["stored"], record["missing"]) == (3, 3, 0)
    # AND once one's metadata.json is deleted, the audit names it missing: exit 1
    assert lagging.resources is not None
    key = f"{result_prefix(JobKind.EXTRACT, jobs[0])}/metadata.json"
    boto3.client("s3").delete_object(Bucket=lagging.resources.bucket, Key=key)
    after = cli("audit", "--since", format_time(since), "--json", clock=lagging.clock)
    assert after.code == 1 and f"missing: extract {jobs[0]}" in after.err, after.err
