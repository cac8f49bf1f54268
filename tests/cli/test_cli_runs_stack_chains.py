"""``runs show`` of a run whose jobs fail retryably with a stack: each URL followed through its
resubmissions to the job that ended its chain, as the run sweep does. Judged from outside: the
simulator's record of each URL's jobs against the CLI's exit code and what it prints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline_local.stack import LocalStack
from tests.cli.conftest import Cli, quiet_stack, use_stack
from tests.cli.test_cli_runs import _file


@pytest.fixture(scope="module")
def module_stack() -> Iterator[LocalStack]:
    """The conftest's stack, on an API where half the jobs fail retryably."""
    with quiet_stack(retryable_failure_rate=0.5) as stack:
        yield stack


@pytest.fixture
def live(module_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> LocalStack:
    return use_stack(module_stack, monkeypatch)


def _chains(stack: LocalStack, urls: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each URL's jobs in the simulator's record, oldest first."""
    jobs = sorted(stack.sim.truth_jobs("extract"), key=lambda j: j["created_at"])
    return {url: [j for j in jobs if j["url"] == url] for url in urls}


def _running(job: dict[str, Any]) -> bool:
    return job["status"] in ("queued", "processing")


def _ended(chain: list[dict[str, Any]]) -> bool:
    """The URL's last job settled, and not one the pipeline resubmits (a retryable failure
    within the default budget of 2 resubmissions)."""
    last = chain[-1]
    return not _running(last) and not (last["retryable"] and len(chain) <= 2)


def test_cli_stack_runs_show_follows_each_url_to_the_job_that_ended_its_chain(
    live: LocalStack, cli: Cli, tmp_path: Path
):
    # GIVEN an async run of 6 URLs on an API where half the jobs fail retryably
    path, urls = _file(tmp_path, "stack-chains", 6)
    submitted = cli("submit", str(path), "--mode", "async", "--json", clock=live.clock)
    assert submitted.code == 0, submitted.err
    name = submitted.err.splitlines()[0].split()[2].rstrip(":")
    # WHEN it is shown while a URL's first job has failed and its resubmission still runs
    open_codes: list[int] = []
    for _ in range(600):
        live.step(1.0)
        chains = _chains(live, urls)
        if any(len(c) > 1 and _running(c[-1]) for c in chains.values()):
            open_codes.append(cli("runs", "show", name, "--json").code)
        elif all(_ended(c) for c in chains.values()):
            break
    for _ in range(25):
        live.step(1.0)
    # THEN it was not complete then (exit 1)
    assert open_codes and set(open_codes) == {1}
    # AND once every chain ended it is complete, each URL given its last job and outcome
    shown = cli("runs", "show", name, "--json")
    by_url = cli("runs", "show", name, "--urls", "--json")
    assert shown.code == 0, shown.err
    finals = {url: chain[-1] for url, chain in _chains(live, urls).items()}
    stored = sum(job["final_status"] == "completed" for job in finals.values())
    record = shown.record()
    assert (record["settled"], record["stored"]) == (6, stored)
    assert record["dead_lettered"] == 6 - stored
    rows = {row["url"]: row for row in by_url.records()}
    for url, job in finals.items():
        want = "stored" if job["final_status"] == "completed" else "dead_lettered"
        assert (rows[url]["job_id"], rows[url]["outcome"]) == (job["job_id"], want), url
