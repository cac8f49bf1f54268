"""``runs list|show|resolve`` through the CLI's entry point, judged by the simulator's record."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from tests.cli.conftest import Cli, Result, assert_one_error_line
from tests.cli.test_cli_runs import _error_line, _file, _once_each, clock, sim

__all__ = ["clock", "sim"]  # the fixtures, shared with the submit tests


def _name(submitted: Result) -> str:
    """The run's name, from submit's first stderr line (``run NAME: ...``)."""
    return submitted.err.splitlines()[0].split()[2].rstrip(":")


def test_cli_runs_list_and_show_a_complete_run_with_a_rejected_url(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN a run of two good URLs and one the API refuses (422)
    path, urls = _file(tmp_path, "show", 2)
    path.write_text(path.read_text() + "https://:80\n")
    submitted = cli("submit", str(path), "--json", clock=clock)
    assert submitted.code == 1
    name = _name(submitted)
    # WHEN it is shown before its jobs settled: not complete, the unsettled jobs named
    early = cli("runs", "show", name, "--json")
    line = _error_line(early, f"run {name} is not complete", "2 job(s) not settled")
    assert "in doubt" not in line
    assert early.record()["settled"] == 0
    # and after poll followed the run's jobs until they settled
    polled = cli("poll", "--run", name, "--json", clock=clock)
    assert polled.code == 0, polled.err
    assert {r["status"] for r in polled.records()} == {"completed"}
    listed = cli("runs", "list", "--json")
    shown = cli("runs", "show", name, "--json")
    by_url = cli("runs", "show", name, "--urls", "--json")
    # THEN a rejected URL is settled: the run is complete, exit 0, the reason under --urls
    assert listed.code == 0, listed.err
    [row] = listed.records()
    assert (row["run"], row["mode"], row["urls"]) == (name, "async", 3)
    assert (row["submitted"], row["rejected"], row["in_doubt"], row["planned"]) == (2, 1, 0, 0)
    assert (row["settled"], row["stored"], row["dead_lettered"]) == (2, 0, 0)
    assert row["tokens_charged"] is not None and row["tokens_charged"] > 0
    assert row["complete"] is True
    assert shown.code == 0 and shown.err == "", shown.err
    assert shown.record()["submitted"] == 2
    assert by_url.code == 0, by_url.err
    rows = {r["url"]: r for r in by_url.records()}
    assert all(rows[u]["state"] == "submitted" and rows[u]["job_id"] for u in urls)
    assert rows["https://:80"]["state"] == "rejected"
    assert rows["https://:80"]["reason"].startswith("HTTP 422")
    # and the table for people says the same
    table = cli("runs", "show", name, "--urls")
    assert "rejected" in table.out and "HTTP 422" in table.out
    _once_each(sim, urls)


def test_cli_runs_show_names_a_batch_in_doubt_and_resolve_reposts_it_only_when_told(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN a batch run whose first batch's answer was lost after the API created it
    path, urls = _file(tmp_path, "resolve", 3)
    sim.sim.faults.lose_answers("POST /v1/batch", [504])
    argv = ("submit", str(path), "--mode", "batch", "--batch-size", "2", "--json")
    name = _name(cli(*argv, clock=clock))
    # WHEN it is shown: exit 1, the entry named "in doubt"
    shown = cli("runs", "show", name, "--json")
    _error_line(shown, f"run {name} is not complete", "1 entry in doubt")
    assert "scrape-pipeline: in doubt: #0 (2 URLs from" in shown.err
    assert shown.record()["in_doubt"] == 2 and shown.record()["complete"] is False
    # WHEN resolve runs without the flag: nothing is posted, it stays in doubt
    looked = cli("runs", "resolve", name, "--json", clock=clock)
    _error_line(looked, "1 entry in doubt")
    _once_each(sim, urls)
    # WHEN the operator orders a re-post: planned again, and the next submit posts it
    ordered = cli("runs", "resolve", name, "--repost-in-doubt", "--json", clock=clock)
    _error_line(ordered, "1 entry planned")
    assert "planned again: #0 (2 URLs from" in ordered.err
    assert ordered.record()["planned"] == 2
    resumed = cli(*argv, clock=clock)
    assert resumed.code == 0, resumed.err
    assert "resumed (1 planned, 1 submitted)" in resumed.err
    # THEN the simulator saw the two URLs of that batch twice (as ordered), the third once
    submissions = sim.sim.submissions()
    assert [submissions.get(u) for u in urls] == [2, 2, 1]
    # and once poll followed its batches, the run is complete
    open_until_polled = cli("runs", "show", name, "--json")
    _error_line(open_until_polled, "2 job(s) not settled")
    assert cli("poll", "--run", name, "--json", clock=clock).code == 0
    done = cli("runs", "show", name, "--json")
    assert done.code == 0 and done.record()["submitted"] == 3, done.err
    assert done.record()["settled"] == 3
    # a second order finds nothing in doubt and posts nothing
    again = cli("runs", "resolve", name, "--repost-in-doubt", "--json", clock=clock)
    assert again.code == 0 and "planned again" not in again.err
    assert [sim.sim.submissions().get(u) for u in urls] == [2, 2, 1]


def test_cli_runs_unknown_run_and_missing_journal_are_one_line_exit_2(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    missing = tmp_path / "nowhere.sqlite3"
    no_file = cli("runs", "list", "--journal", str(missing))
    assert_one_error_line(no_file, 2, "no run journal at", str(missing))
    assert not missing.exists()
    path, _ = _file(tmp_path, "unknown", 1)
    assert cli("submit", str(path), clock=clock).code == 0
    for argv in (("show", "nope"), ("resolve", "nope"), ("show", "nope", "--urls")):
        assert_one_error_line(cli("runs", *argv), 2, "no run named 'nope'", "runs list")


def test_cli_runs_list_empty_journal_and_help(cli: Cli, tmp_path: Path):
    journal = tmp_path / "j.sqlite3"
    from scrape_pipeline_ops.runs.sqlite import SqliteJournal

    SqliteJournal(journal).close()
    empty = cli("runs", "list", "--journal", str(journal))
    assert (empty.code, empty.out) == (0, "no runs\n")
    assert cli("runs", "list", "--journal", str(journal), "--json").out == ""
    helped = cli("runs", "resolve", "--help")
    assert "--repost-in-doubt" in helped.out


def test_cli_poll_run_of_an_unknown_run_exit_2_and_an_unfollowed_batch_run_is_open(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    path, urls = _file(tmp_path, "poll-batch", 2)
    submitted = cli("submit", str(path), "--mode", "batch", clock=clock)
    assert submitted.code == 0, submitted.err
    assert_one_error_line(cli("poll", "--run", "nope"), 2, "no run named 'nope'")
    # a local batch run nothing followed yet: its batch not settled, so not complete
    shown = cli("runs", "show", _name(submitted), "--json")
    _error_line(shown, "1 job(s) not settled")
    assert shown.record()["settled"] == 0 and shown.record()["submitted"] == 2
    _once_each(sim, urls)


def test_cli_runs_resolve_a_batch_in_doubt_is_looked_up_before_any_repost_so_needs_the_key(
    sim: SimulatorServer,
    cli: Cli,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    # GIVEN a batch run whose first batch's answer was lost
    path, urls = _file(tmp_path, "no-key", 3)
    sim.sim.faults.lose_answers("POST /v1/batch", [504])
    argv = ("submit", str(path), "--mode", "batch", "--batch-size", "2", "--json")
    name = _name(cli(*argv, clock=clock))
    # WHEN resolve runs with no API key anywhere
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY")
    looked = cli("runs", "resolve", name, "--json", clock=clock)
    ordered = cli("runs", "resolve", name, "--repost-in-doubt", "--json", clock=clock)
    # THEN both say the key is needed for the delivery log's look (exit 2, one line), and the
    # order re-planned nothing: the entry is still in doubt, each URL posted once
    for result in (looked, ordered):
        assert result.code == 2 and "looked up in the API: no API key" in result.err
        assert "planned again" not in result.err and "Traceback" not in result.err
    _error_line(cli("runs", "show", name, "--json", clock=clock), "1 entry in doubt")
    _once_each(sim, urls)


def test_cli_runs_show_joins_what_poll_kept_stored_and_dead_lettered(
    cli: Cli, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from scrape_pipeline_local.simulator import SimConfig
    from tests.cli.conftest import QUIET
    from tests.cli.test_cli_runs import KEY

    # GIVEN an API on which every job fails, and another on which every job completes
    for rate, tag in ((1.0, "failing"), (0.0, "stored")):
        quiet = {**QUIET, "permanent_failure_rate": rate}
        config = SimConfig(**quiet, api_keys=(KEY,), webhook_dispatcher=False, balance_tokens=None)
        with SimulatorServer(config, clock) as server:
            monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
            monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
            path, urls = _file(tmp_path, f"kept-{tag}", 2)
            name = _name(cli("submit", str(path), "--run", f"kept-{tag}", clock=clock))
            # WHEN poll follows the run, writing what settles under --out
            out = tmp_path / f"out-{tag}"
            polled = cli("poll", "--run", name, "--out", str(out), "--json", clock=clock)
            assert polled.code == 0, polled.err
            shown = cli("runs", "show", name, "--json")
            # THEN runs show joins what poll saw: complete either way, the failures
            # dead-lettered, the completed ones stored where poll wrote them
            assert shown.code == 0, shown.err
            record = shown.record()
            assert record["settled"] == 2
            if tag == "failing":
                assert (record["dead_lettered"], record["stored"]) == (2, 0)
            else:
                assert (record["dead_lettered"], record["stored"]) == (0, 2)
                assert len(list(out.iterdir())) == 2
            _once_each(server, urls)
