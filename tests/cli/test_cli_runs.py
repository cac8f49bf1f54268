"""``submit`` as a run, without a stack: judged by the simulator's record of POSTs per URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from tests.cli.conftest import QUIET, Cli, Result, assert_one_error_line

KEY = "runs-cli-key"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sim(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatorServer]:
    config = SimConfig(**QUIET, api_keys=(KEY,), webhook_dispatcher=False, balance_tokens=None)
    server = SimulatorServer(config, clock).start()
    monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
    monkeypatch.delenv("LEDGER_TABLE_NAME", raising=False)
    yield server
    server.stop()


def _file(tmp_path: Path, tag: str, n: int) -> tuple[Path, list[str]]:
    urls = [f"https://example.com/cli-runs/{tag}/{i}" for i in range(n)]
    path = tmp_path / f"{tag}.txt"
    path.write_text("\n".join(urls) + "\n")
    return path, urls


def _once_each(sim: SimulatorServer, urls: list[str]) -> None:
    submissions = sim.sim.submissions()
    assert {u: submissions.get(u, 0) for u in urls} == dict.fromkeys(urls, 1)


def _error_line(result: Result, *needles: str) -> str:
    """The last stderr line is the one error line; the lines above it are notices."""
    *notices, last = result.err.splitlines()
    assert all(n.startswith("scrape-pipeline: ") for n in notices)
    return assert_one_error_line(Result(result.code, result.out, last), 1, *needles)


def test_cli_submit_names_the_run_first_and_a_rerun_resumes_it(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN a file of three URLs submitted as a run
    path, urls = _file(tmp_path, "resume", 3)
    first = cli("submit", str(path), "--mode", "async", "--json", clock=clock)
    assert first.code == 0, first.err
    head = first.err.splitlines()[0]
    assert head.startswith("scrape-pipeline: run async-") and "planned 3 URL(s)" in head
    name = head.split()[2].rstrip(":")
    assert [line["url"] for line in first.records()] == urls
    assert {line["run"] for line in first.records()} == {name}
    # WHEN the same command runs again
    again = cli("submit", str(path), "--mode", "async", "--json", clock=clock)
    # THEN it names the same run, says what it found, and posts nothing
    assert again.code == 0, again.err
    assert again.err.splitlines() == [
        f"scrape-pipeline: run {name}: resumed (3 submitted); journal "
        f"{tmp_path / 'journal' / 'runs.sqlite3'}"
    ]
    assert again.out == ""
    _once_each(sim, urls)


def test_cli_submit_batch_split_and_lost_answer_named_in_doubt(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN five URLs in batches of two, the first batch's answer lost after it was created
    path, urls = _file(tmp_path, "batch-doubt", 5)
    sim.sim.faults.lose_answers("POST /v1/batch", [502])
    argv = ("submit", str(path), "--mode", "batch", "--batch-size", "2", "--json")
    result = cli(*argv, clock=clock)
    # THEN the other two batches are submitted, the first is named in doubt, exit 1
    line = _error_line(result, "1 entry in doubt", "#0 (2 URLs from")
    assert "the same command resumes it" in line
    assert "scrape-pipeline: in doubt: #0 (2 URLs from" in result.err
    assert [(r["status"], r.get("urls")) for r in result.records()] == [
        ("in_doubt", 2),
        ("queued", 2),
        ("queued", 1),
    ]
    # WHEN it runs again: still in doubt, nothing posted twice
    again = cli(*argv, clock=clock)
    _error_line(again, "1 entry in doubt")
    _once_each(sim, urls)


def test_cli_submit_stops_on_402_and_finishes_after_a_top_up(
    cli: Cli, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = SimConfig(**QUIET, api_keys=(KEY,), webhook_dispatcher=False, balance_tokens=2)
    with SimulatorServer(config, clock) as server:
        monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
        monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
        path, urls = _file(tmp_path, "balance", 3)
        stopped = cli("submit", str(path), "--json", clock=clock)
        _error_line(stopped, "stopped (HTTP 402", "1 entr(ies) left planned")
        assert len(stopped.records()) == 2
        server.sim.top_up(KEY, 5)
        finished = cli("submit", str(path), "--json", clock=clock)
        assert finished.code == 0, finished.err
        assert "resumed (1 planned, 2 submitted)" in finished.err
        assert [r["url"] for r in finished.records()] == urls[2:]
        _once_each(server, urls)


def test_cli_submit_journal_flag_and_named_run(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    path, urls = _file(tmp_path, "named", 2)
    journal = tmp_path / "elsewhere" / "mine.sqlite3"
    result = cli("submit", str(path), "--run", "nightly-1", "--journal", str(journal), clock=clock)
    assert result.code == 0, result.err
    assert result.err.startswith("scrape-pipeline: run nightly-1: planned 2 URL(s)")
    assert journal.is_file()
    # the same name for other URLs is a mistake, caught before anything is posted
    other, _ = _file(tmp_path, "other", 1)
    refused = cli("submit", str(other), "--run", "nightly-1", "--journal", str(journal))
    assert_one_error_line(refused, 2, "nightly-1", "other URLs")
    _once_each(sim, urls)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--batch-size", "10"), "--batch-size applies to --mode batch"),
        (("--mode", "batch", "--batch-size", "0"), "--batch-size"),
        (("--mode", "batch", "--batch-size", "1001"), "--batch-size"),
        (("--run", "bad name!"), "--run"),
        (("--mode", "sync", "--run", "x"), "--run and --journal apply"),
    ],
)
def test_cli_submit_run_options_usage_errors(
    sim: SimulatorServer, cli: Cli, argv: tuple[str, ...], needle: str
):
    result = cli("submit", *argv, stdin="https://example.com/cli-runs/usage\n")
    assert_one_error_line(result, 2, needle)
    assert sim.sim.submissions() == {}


def test_cli_submit_help_says_where_the_journal_is(cli: Cli):
    result = cli("submit", "--help")
    assert "SCRAPE_PIPELINE_JOURNAL" in result.out and "runs.sqlite3" in result.out


def test_cli_submit_under_listing_lag_says_what_it_waits_for_and_posts_each_url_once(
    cli: Cli, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN an API that lists jobs 240-265 s late (the listing-lag profile) and the second
    # extract POST's answer lost after the job was made
    config = SimConfig(
        **QUIET,
        api_keys=(KEY,),
        webhook_dispatcher=False,
        balance_tokens=None,
        listing_lag_min_s=240.0,
        listing_lag_max_s=265.0,
    )
    with SimulatorServer(config, clock) as server:
        monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
        monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
        path, urls = _file(tmp_path, "listing-lag", 3)
        server.sim.faults.lose_answers("POST /v1/extract", [504])
        # WHEN the file is submitted
        result = cli("submit", str(path), "--mode", "async", "--json", clock=clock)
        # THEN it said what it waited for, adopted the job, and exits 0 with each URL once
        submissions = server.sim.submissions()
        assert {u: submissions.get(u, 0) for u in urls} == dict.fromkeys(urls, 1)
        assert result.code == 0, result.err
        assert "for the job list to catch up (listing lag 300 s)" in result.err
