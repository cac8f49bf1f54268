"""docs/benchmarks.md's and bench/RESULTS.md's figures are the saved ones, and say whence.

Each ``<!-- bench:NAME -->`` block of docs/benchmarks.md is exactly what ``bench/results/NAME.json``
renders (its stamp and table, as ``bench.report.save`` wrote them); every results file the
report draws from carries its date, machine (CPU model, cores) and the load at start and end;
the committed ``bench/RESULTS.md`` is what ``make bench-results`` draws from the committed
files today, with the reconciler's cadence from what the runs recorded, never a constant.
Pure file reading and one drawing into a temporary folder: a few seconds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import results_report
from bench.cadence import Cadence
from bench.report import README, RESULTS, readme_block

BLOCK = re.compile(r"<!-- bench:(\w+) -->\n(.*?)\n<!-- /bench:\1 -->", re.S)
# What bench.results_report draws from (scale and submit: their own sections).
DRAWN = ("sweep", "latency", "pipeline", "receiver", "polling", "scale", "submit")


def _saved(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    assert path.exists(), f"{path} is not committed: run `make bench-{name}`"
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _blocks() -> dict[str, str]:
    return dict(BLOCK.findall(README.read_text()))


def test_the_readme_has_the_benchmark_blocks_it_describes() -> None:
    assert {"polling", "receiver", "cold_start", "pipeline", "latency", "submit"} <= set(_blocks())


@pytest.mark.parametrize("name", sorted(_blocks()))
def test_each_readme_block_is_its_saved_figures(name: str) -> None:
    # GIVEN the figures saved by the benchmark
    document = _saved(name)
    assert "readme_table" in document, f"saved before README blocks were recorded: re-run {name}"
    # THEN the page's block is exactly their stamp and table
    assert _blocks()[name].strip() == readme_block(document).strip()


@pytest.mark.parametrize("name", DRAWN)
def test_every_results_file_the_report_draws_has_its_date_machine_and_load(name: str) -> None:
    document = _saved(name)
    about = document["machine"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", about["date"]), about
    assert about["cpus"] >= 1 and about["cpu_model"], about
    load = document["load_average"]
    assert len(load["start"]) >= 1 and len(load["end"]) >= 1, load


def test_the_committed_report_is_what_make_bench_results_draws_today(tmp_path: Path) -> None:
    # WHEN the report is drawn from the committed files
    results_report.build(RESULTS, tmp_path, log=lambda _: None)
    drawn = (tmp_path / "RESULTS.md").read_text()
    # THEN it is the committed one, every chart linked is drawn
    assert drawn == (RESULTS.parent / "RESULTS.md").read_text(), "run `make bench-results`"
    for link in re.findall(r"!\[[^\]]*\]\((charts/[^)]+)\)", drawn):
        assert (tmp_path / link).is_file(), link


def test_the_report_takes_the_reconciler_cadence_from_the_runs_records(tmp_path: Path) -> None:
    results_report.build(RESULTS, tmp_path, log=lambda _: None)
    drawn = (tmp_path / "RESULTS.md").read_text()
    cadence = Cadence.from_saved(_saved("sweep")["reconciler"])
    # The runs' cadence, and today's template's: a change there asks for new runs.
    assert cadence == Cadence.from_template(), "template.yaml changed: run `make bench`"
    assert f"`{cadence.schedule}` ({cadence.every})" in drawn
    assert f"≥ {cadence.threshold_seconds:g} s (units)" in drawn
    assert f"a run every {cadence.interval_seconds:g} s" in drawn  # the cost model's
    # Nothing left of the 10-minute reconciler's constants (issue 22 item 3)
    for stale in ("reconciler to run every 10 minutes", "600 s threshold", "≥ 600 s"):
        assert cadence.interval_seconds == 600 or stale not in drawn, stale
