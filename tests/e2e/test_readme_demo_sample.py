"""docs/getting-started.md's sample of ``make demo``'s report is a real run's: the same rows
in the same order, and the same figures where a seeded run repeats them (counts, must-be-zero
rows, events).

``UPDATE_DEMO_SAMPLE=1`` writes the run's table into the page (120 columns, as the sample
says). Figures that follow wall time or thread timing (latencies, wall time, AWS calls, the
reconciler's recoveries) are the run's own and are not compared.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

from scrape_pipeline_local.demo import Demo, report_table
from scrape_pipeline_local.function_env import functions_write_to

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
SAMPLE = re.compile(
    r"(A run of `make demo` on this 2-core machine.*?\n```\n)(.*?)(```\n)", re.DOTALL
)
WIDTH = 120
# The rows whose figures a seeded run repeats (the rest follow wall time and thread timing).
REPEATED = (
    "submitted",
    "settled (jobs, batch items, crawl pages)",
    "stored",
    "resubmitted (retryable failures)",
    "dead-lettered",
    "cancelled",
    "events received, by type",
    "audit of the window (API and S3)",
)


def rows(table: str) -> list[tuple[str, str]]:
    """(label, value) of each row of a rendered report."""
    found = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) == 4 and cells[1]:
            found.append((cells[1], cells[2]))
    return found


def _sample() -> tuple[str, re.Match[str]]:
    text = PAGE.read_text()
    match = SAMPLE.search(text)
    assert match, "docs/getting-started.md has no sample of the demo's report"
    return text, match


@pytest.mark.timeout(900)
def test_the_readmes_demo_sample_is_a_real_runs_report(tmp_path: Path):
    # GIVEN the page's sample, and the demo run as `make demo` runs it (its defaults)
    text, match = _sample()
    with (tmp_path / "functions.log").open("w") as log, functions_write_to(log):
        report = Demo(jobs=200, chaos="default", seed=7).run()
    out = io.StringIO()
    from rich.console import Console

    Console(file=out, width=WIDTH).print(
        report_table(report, "scrape-pipeline demo (chaos: default)")
    )
    table = "".join(f"{line.rstrip()}\n" for line in out.getvalue().splitlines())
    if os.environ.get("UPDATE_DEMO_SAMPLE"):
        PAGE.write_text(text[: match.start(2)] + table + text[match.end(2) :])
        return
    # THEN the sample has the run's rows, in order, and the figures a seeded run repeats
    sample, real = rows(match.group(2)), rows(table)
    assert [label for label, _ in sample] == [label for label, _ in real]
    repeated = {label: value for label, value in real if label in REPEATED or label.isupper()}
    assert {label: value for label, value in sample if label in repeated} == repeated
    # AND the events' rows say what the issue asks: none missing, the latency's tail in bound
    figures = dict(real)
    assert figures["OUTCOMES WITHOUT AN EVENT"] == "0"
    assert report.events.latency_p99 <= 2.0, report.events.latency_p99
