"""``submit`` and ``runs`` with a stack: the journal in the ledger table, judged from outside
(the simulator's record of POSTs per URL, the ledger table read back with boto3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from scrape_pipeline_local.stack import LocalStack
from tests.cli.conftest import Cli, Result, assert_one_error_line
from tests.cli.test_cli_runs import _file


def _once_each(stack: LocalStack, urls: list[str]) -> None:
    submissions = stack.sim.submissions()
    assert {u: submissions.get(u, 0) for u in urls} == dict.fromkeys(urls, 1)


def _items(stack: LocalStack, prefix: str) -> list[dict[str, Any]]:
    assert stack.resources is not None
    items = boto3.client("dynamodb").scan(TableName=stack.resources.table)["Items"]
    return [i for i in items if i["pk"]["S"].startswith(prefix)]


def _name(submitted: Result) -> str:
    return submitted.err.splitlines()[0].split()[2].rstrip(":")


def _job_ids(result: Result) -> list[str]:
    return sorted({r["job_id"] for r in result.records() if r["job_id"]})


def _settle(stack: LocalStack) -> None:
    for _ in range(25):
        stack.step(1.0)


def test_cli_stack_submit_journals_in_the_ledger_table_and_runs_show_joins_its_outcomes(
    live: LocalStack, cli: Cli, tmp_path: Path
):
    assert live.resources is not None
    # GIVEN an async run submitted with a stack
    path, urls = _file(tmp_path, "stack-async", 2)
    submitted = cli("submit", str(path), "--mode", "async", "--json", clock=live.clock)
    assert submitted.code == 0, submitted.err
    # THEN its first stderr line names the table, and the journal is in the run# key space
    head = submitted.err.splitlines()[0]
    assert head.endswith(f"journal DynamoDB table {live.resources.table}"), head
    name = _name(submitted)
    assert len(_items(live, f"run#{name}")) == 3  # the head and one entry per URL
    assert not (tmp_path / "journal" / "runs.sqlite3").exists()
    # WHEN it is shown before the pipeline settled its jobs: not complete, exit 1
    early = cli("runs", "show", name, "--json")
    assert early.code == 1 and "2 job(s) not settled" in early.err, early.err
    # WHEN the pipeline has processed them (webhooks, queue, processor)
    _settle(live)
    shown = cli("runs", "show", name, "--json")
    listed = cli("runs", "list", "--json")
    by_url = cli("runs", "show", name, "--urls", "--json")
    # THEN the run is complete: every URL submitted, every job settled and stored
    assert shown.code == 0, shown.err
    record = shown.record()
    assert (record["submitted"], record["settled"], record["stored"]) == (2, 2, 2)
    assert record["dead_lettered"] == 0 and record["complete"] is True
    charged = [live.client().get_job(job_id).tokens_charged or 0 for job_id in _job_ids(by_url)]
    assert record["tokens_charged"] == sum(charged) > 0
    assert name in {row["run"] for row in listed.records()}
    followed = cli("poll", "--run", name, "--json", clock=live.clock)
    assert followed.code == 0, followed.err
    assert sorted(r["url"] for r in followed.records()) == sorted(urls)
    assert {r["outcome"] for r in by_url.records()} == {"stored"}
    done = [
        i
        for i in _items(live, "extract#")
        if i["job_id"]["S"] in {r["job_id"] for r in by_url.records()}
    ]
    assert [i["state"]["S"] for i in done] == ["DONE", "DONE"]
    _once_each(live, urls)
    # an unknown run is one line, exit 2
    assert_one_error_line(cli("runs", "show", "nope"), 2, "no run named 'nope'", "DynamoDB table")


def test_cli_stack_batch_is_announced_in_the_write_of_its_id_and_resolved_without_a_key(
    live: LocalStack, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a batch run of three URLs in batches of two, with a stack
    path, urls = _file(tmp_path, "stack-batch", 3)
    argv = ("submit", str(path), "--mode", "batch", "--batch-size", "2", "--json")
    submitted = cli(*argv, clock=live.clock)
    assert submitted.code == 0, submitted.err
    lines = submitted.records()
    assert [line["announced"] for line in lines] == [True, True]
    # THEN each batch has its ledger row, as the announcement writes it
    for line in lines:
        [row] = _items(live, f"batch#{line['job_id']}")
        assert row["source"]["S"] == "submitted"
    _once_each(live, urls)
    # WHEN it is resolved with no API key at all: nothing in doubt, nothing asked of the API
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY", raising=False)
    monkeypatch.delenv("GEONODE_API_KEY_SECRET_ID", raising=False)
    resolved = cli("runs", "resolve", _name(submitted), "--json", clock=live.clock)
    assert resolved.code == 0, resolved.err
    assert resolved.record()["submitted"] == 3
    # and after the pipeline stored the batches, the run shows complete
    _settle(live)
    shown = cli("runs", "show", _name(submitted), "--json")
    assert shown.code == 0, shown.err
    assert (shown.record()["settled"], shown.record()["stored"]) == (3, 3)
    _once_each(live, urls)


def test_cli_stack_journal_flag_forces_the_file_and_the_announcement_is_its_own_write(
    live: LocalStack, cli: Cli, tmp_path: Path
):
    # GIVEN a crawl run with a stack, told to journal in a file
    path, urls = _file(tmp_path, "stack-forced", 1)
    journal = tmp_path / "forced.sqlite3"
    argv = ("submit", str(path), "--mode", "crawl", "--journal", str(journal), "--json")
    submitted = cli(*argv, clock=live.clock)
    # THEN the file is the journal (first line), the table has no run of it, and the crawl
    # was announced to the ledger all the same
    assert submitted.code == 0, submitted.err
    assert submitted.err.splitlines()[0].endswith(f"journal {journal}")
    assert journal.is_file()
    assert _items(live, f"run#{_name(submitted)}") == []
    [line] = submitted.records()
    assert line["announced"] is True
    [row] = _items(live, f"crawl#{line['job_id']}")
    assert row["source"]["S"] == "submitted"
    _once_each(live, urls)
