"""``audit --run`` on retried work: a run's job that failed retryably and was resubmitted, and a
batch's item retried as an extract job, are judged by the final job of their chain (issue 35
item 3), as the window audit judges them. Judged from outside: the CLI's exit code and report,
against the simulator's record of jobs and S3's objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline_local.stack import LocalStack
from scrape_pipeline_ops.audit import Verdict
from tests.cli.conftest import Cli, own_stack
from tests.cli.test_cli_runs import _file
from tests.pipeline.conftest import truth, versions


@pytest.fixture
def flaky() -> Iterator[LocalStack]:
    """A stack of its own whose jobs and batch items fail retryably at 40 % (seeded)."""
    with own_stack(retryable_failure_rate=0.4) as stack:
        yield stack


@pytest.fixture
def flaky_lagging() -> Iterator[LocalStack]:
    """As ``flaky``, and the API lists each job four minutes after its creation."""
    lag = {"listing_lag_min_s": 240.0, "listing_lag_max_s": 260.0}
    with own_stack(retryable_failure_rate=0.4, **lag) as stack:
        yield stack


def _settled_urls(stack: LocalStack) -> set[str]:
    """URLs with a result or a dead-letter record in S3, by the simulator's jobs and items."""
    keys = set(versions(stack))
    found = set()
    for job in truth(stack, "extract"):
        kid = job["job_id"]
        if {f"results/extract/{kid}/metadata.json", f"dead-letters/extract/{kid}.json"} & keys:
            found.add(job["url"])
    for item in truth(stack, "batch_item"):
        where = f"batch/{item['job_id']}/{int(item['index']):05d}"
        if {f"results/{where}/metadata.json", f"dead-letters/{where}.json"} & keys:
            found.add(item["url"])
    return found


def test_audit_of_a_run_follows_each_url_to_its_final_job(
    flaky: LocalStack, cli: Cli, tmp_path: Path
):
    since = flaky.clock.time() - 60.0
    # GIVEN an async run and a batch run whose jobs and items fail retryably at 40 %: the
    # pipeline resubmits each failed extract job and retries each failed item as an extract job
    extracts, async_urls = _file(tmp_path, "chain-async", 8)
    batch, batch_urls = _file(tmp_path, "chain-batch", 8)
    for path, mode, name in ((extracts, "async", "chain-a"), (batch, "batch", "chain-b")):
        submitted = cli(
            "submit", str(path), "--mode", mode, "--run", name, "--json", clock=flaky.clock
        )
        assert submitted.code == 0, submitted.err
    urls = set(async_urls) | set(batch_urls)
    # WHEN the stack runs until every URL's result (or dead letter) is in S3, and a while more
    flaky.run_until(lambda: urls <= _settled_urls(flaky), step=5.0, limit=3600)
    for _ in range(12):
        flaky.step(5.0)
    # THEN (the simulator's record) an async URL was resubmitted and a batch item retried
    jobs_per_url: dict[str, int] = {}
    for job in truth(flaky, "extract"):
        jobs_per_url[job["url"]] = jobs_per_url.get(job["url"], 0) + 1
    assert any(jobs_per_url.get(u, 0) > 1 for u in async_urls), jobs_per_url
    failed_items = [i for i in truth(flaky, "batch_item") if i["status"] == "failed"]
    assert failed_items and all(jobs_per_url.get(i["url"], 0) >= 1 for i in failed_items)
    # WHEN each run and the whole window are audited (no grace: all settled)
    window = ("--since", format_time(since), "--grace", "0", "--json")
    whole = cli("audit", *window, clock=flaky.clock)
    run_a = cli("audit", *window, "--run", "chain-a", clock=flaky.clock)
    run_b = cli("audit", *window, "--run", "chain-b", clock=flaky.clock)
    # THEN nothing is missing: each run's failed job is judged resubmitted, its final job on
    # its own (stored or dead-lettered), exit 0
    assert whole.code == 0, whole.err
    assert run_a.code == 0, run_a.err
    assert run_b.code == 0, run_b.err
    a, b, w = run_a.record(), run_b.record(), whole.record()
    assert a["resubmitted"] >= 1 and b["resubmitted"] >= len(failed_items), (a, b)
    # AND the runs' audits agree with the window audit, verdict by verdict (the window holds
    # these two runs' jobs only)
    assert {v: a[v] + b[v] for v in Verdict} == {v: w[v] for v in Verdict}
    assert a["jobs"] + b["jobs"] == w["jobs"]


def test_audit_of_a_run_follows_chains_the_api_lists_late_through_the_ledger_and_manifest(
    flaky_lagging: LocalStack, cli: Cli, tmp_path: Path
):
    stack = flaky_lagging
    since = stack.clock.time() - 60.0
    # GIVEN an async run and a batch run with retried work, all settled and stored, audited
    # while the API's job list shows none of the resubmissions and item retries yet
    extracts, async_urls = _file(tmp_path, "lag-async", 8)
    batch, batch_urls = _file(tmp_path, "lag-batch", 8)
    for path, mode, name in ((extracts, "async", "lag-a"), (batch, "batch", "lag-b")):
        submitted = cli("submit", str(path), "--mode", mode, "--run", name, clock=stack.clock)
        assert submitted.code == 0, submitted.err
    urls = set(async_urls) | set(batch_urls)
    stack.run_until(lambda: urls <= _settled_urls(stack), step=5.0, limit=3600)
    retried = [j for j in truth(stack, "extract") if j["url"] in urls]
    newest = max(j["created_at"] for j in retried)
    assert len(retried) > len(async_urls), "nothing was retried"
    client = stack.client()
    listed = client.list_jobs(start_date=newest - 1.0, page_size=100)
    assert not listed.items, "the retries are listed already"
    # WHEN each run is audited
    window = ("--since", format_time(since), "--grace", "0", "--json")
    run_a = cli("audit", *window, "--run", "lag-a", clock=stack.clock)
    run_b = cli("audit", *window, "--run", "lag-b", clock=stack.clock)
    # THEN nothing is missing: the ledger (a resubmission's successor) and the batch's
    # manifest (an item's retry) named the jobs the list lacks, each read by its own GET
    assert run_a.code == 0, run_a.err
    assert run_b.code == 0, run_b.err
    a, b = run_a.record(), run_b.record()
    assert a["resubmitted"] >= 1 and b["resubmitted"] >= 1, (a, b)
    assert a["calls"]["job_gets"] >= 1 and b["calls"]["job_gets"] >= 1, (a, b)
