"""``poll --run`` of a batch or crawl run without a stack, then ``runs show``: judged by the
simulator's record of each batch item and crawl page, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from tests.cli.conftest import QUIET, Cli, assert_one_error_line
from tests.cli.test_cli_runs import KEY, _error_line, _file, _once_each, clock

__all__ = ["clock"]  # the fixture, shared with the submit tests

# Two items in five fail for good: a batch run ends part stored, part dead-lettered.
FAILING: dict[str, Any] = {**QUIET, "permanent_failure_rate": 0.4}


@pytest.fixture
def sim(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatorServer]:
    config = SimConfig(**FAILING, api_keys=(KEY,), webhook_dispatcher=False, balance_tokens=None)
    with SimulatorServer(config, clock) as server:
        monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
        monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
        monkeypatch.delenv("LEDGER_TABLE_NAME", raising=False)
        yield server


def _submitted(cli: Cli, clock: ManualClock, path: Path, *flags: str) -> tuple[str, set[str]]:
    """Submit ``path`` as a run: its name (submit's first stderr line) and its job ids."""
    submitted = cli("submit", str(path), *flags, "--json", clock=clock)
    assert submitted.code == 0, submitted.err
    name = submitted.err.splitlines()[0].split()[2].rstrip(":")
    return name, {r["job_id"] for r in submitted.records()}


def _truth(sim: SimulatorServer, kind: str, job_ids: set[str]) -> list[dict[str, Any]]:
    """The simulator's own record of every item (or page) of ``job_ids``."""
    return [r for r in sim.sim.truth_jobs(kind) if r["job_id"] in job_ids]


def _charged(sim: SimulatorServer, kind: str, job_ids: set[str]) -> int:
    """What the simulator charged for ``job_ids``: the tokens of their completed work."""
    account = sim.sim.account_of(KEY)
    assert account is not None
    now = sim.sim.clock.time()
    get = sim.sim.get_batch if kind == "batch" else sim.sim.get_crawl
    total = 0
    for job_id in job_ids:
        job = get(account, job_id)
        works = [work for _, work in job.items] if kind == "batch" else job.pages  # type: ignore[union-attr]
        total += sum(work.tokens_charged(now) for work in works)
    return total


def test_cli_poll_run_follows_a_batch_run_and_runs_show_joins_each_item_as_its_url(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN seven URLs submitted as three batches, on an API where some items fail
    path, urls = _file(tmp_path, "paged-batch", 7)
    name, batches = _submitted(cli, clock, path, "--mode", "batch", "--batch-size", "3")
    assert len(batches) == 3
    # WHEN it is shown before anything followed its batches: not complete, exit 1
    early = cli("runs", "show", name, "--json")
    _error_line(early, f"run {name} is not complete", "3 job(s) not settled")
    assert early.record()["settled"] == 0
    # WHEN poll follows the run, writing under --out
    out = tmp_path / "out"
    polled = cli("poll", "--run", name, "--out", str(out), "--json", clock=clock)
    assert polled.code == 0, polled.err
    shown = cli("runs", "show", name, "--json")
    by_url = cli("runs", "show", name, "--urls", "--json")
    # THEN each URL ends as the simulator says its item did: completed stored, failed
    # dead-lettered; the tokens are what it charged; the run is complete, exit 0
    truth = _truth(sim, "batch_item", batches)
    assert sorted(t["url"] for t in truth) == sorted(urls)
    final = {t["url"]: t["final_status"] for t in truth}
    completed = sum(status == "completed" for status in final.values())
    assert 0 < completed < len(urls), final  # the seed gives both outcomes
    assert shown.code == 0, shown.err
    record = shown.record()
    assert (record["submitted"], record["settled"], record["complete"]) == (7, 7, True)
    assert (record["stored"], record["dead_lettered"]) == (completed, len(urls) - completed)
    assert record["tokens_charged"] == _charged(sim, "batch", batches) > 0
    words = {"completed": "stored", "failed": "dead_lettered"}
    assert {r["url"]: r["outcome"] for r in by_url.records()} == {
        url: words[status] for url, status in final.items()
    }
    # and poll printed one line per item, each written once under <out>/<batch>/<item>/
    lines = polled.records()
    assert sorted(r["url"] for r in lines) == sorted(urls)
    assert {(r["url"], r["status"]) for r in lines} == set(final.items())
    for line in lines:
        folder = out / line["job_id"] / f"{line['item']:05d}"
        assert line["written"] == str(folder)
        assert (folder / "metadata.json").is_file()
        assert (folder / "content.md").is_file() == (line["status"] == "completed")
    _once_each(sim, urls)
    # WHEN poll follows it again: the same lines, nothing counted twice
    again = cli("poll", "--run", name, "--out", str(out), "--json", clock=clock)
    assert again.code == 0, again.err
    assert sorted(r["url"] for r in again.records()) == sorted(urls)
    assert cli("runs", "show", name, "--json").record() == record


def test_cli_poll_run_follows_a_crawl_run_each_start_url_as_its_crawl(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN two start URLs crawled, three pages each
    path, urls = _file(tmp_path, "paged-crawl", 2)
    name, crawls = _submitted(cli, clock, path, "--mode", "crawl", "--max-pages", "3")
    # WHEN poll follows the run with too short a wait: exit 1, both crawls named unsettled
    short = cli("poll", "--run", name, "--max-wait", "0.5", "--json", clock=clock)
    assert_one_error_line(short, 1, "2 of 2 job(s) not settled")
    assert {r["status"] for r in short.records()} == {"unsettled"}
    _error_line(cli("runs", "show", name, "--json"), "2 job(s) not settled")
    # WHEN it follows the run until they settle, writing under --out
    out = tmp_path / "out"
    polled = cli("poll", "--run", name, "--out", str(out), "--json", clock=clock)
    assert polled.code == 0, polled.err
    shown = cli("runs", "show", name, "--json")
    # THEN every page the simulator made was printed and written once; each start URL is
    # settled as its crawl (stored: it completed), its charge the crawl's pages'
    truth = _truth(sim, "crawl_page", crawls)
    assert len(truth) == 6
    assert sorted((r["job_id"], r["item"]) for r in polled.records()) == sorted(
        (t["job_id"], t["index"]) for t in truth
    )
    assert all((out / t["job_id"] / f"{t['index']:05d}" / "metadata.json").is_file() for t in truth)
    assert shown.code == 0, shown.err
    record = shown.record()
    assert (record["settled"], record["stored"], record["dead_lettered"]) == (2, 2, 0)
    assert record["tokens_charged"] == _charged(sim, "crawl", crawls) > 0
    _once_each(sim, urls)


def test_cli_poll_run_of_a_batch_run_with_extract_ids_is_one_line_exit_2(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    path, _ = _file(tmp_path, "paged-mixed", 2)
    name, _ = _submitted(cli, clock, path, "--mode", "batch")
    job = "0b8f4a52-6a8e-4d83-9d0e-2f6d6c1f7a10"
    assert_one_error_line(cli("poll", "--run", name, job), 2, "is a batch run", "alone")
