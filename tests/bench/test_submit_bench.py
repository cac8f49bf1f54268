"""bench.submit's report: its RESULTS.md section and the verdict on each target (no run)."""

from __future__ import annotations

from typing import Any

from bench import submit
from bench.report import with_section


def run(**figures: Any) -> dict[str, Any]:
    base = {
        "urls": 20000,
        "posts": 20020,
        "wall_s": 410.0,
        "accepted_posts_per_s": 48.8,
        "fraction_of_limit": 0.976,
        "share_429": 0.001,
        "kills": 0,
        "posted_twice": 0,
        "never_submitted": 0,
    }
    return {**base, **figures}


def results() -> dict[str, Any]:
    return {
        "date": "2026-12-02T14:00:00Z",
        "machine": {"cpus": 2, "python": "3.12.1"},
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [1.5, 1.0, 1.0],
        "limit_per_s": 50.0,
        "burst": 100,
        "lost_share": 0.01,
        "kill_every_urls": 2000,
        "modes": ["async"],
        "runs": {
            "async": {
                "clean": run(),
                "kills": run(kills=10, wall_s=500.0, never_submitted=2),
                "kill_wall_ratio": 1.22,
            }
        },
    }


def test_submit_section_has_the_table_and_says_which_targets_are_missed():
    text = submit.section(results())
    assert text.startswith("<!-- bench:submit -->")
    assert text.rstrip().endswith("<!-- /bench:submit -->")
    assert "| async | clean | 20000 |" in text and "| async | kill + 1 % lost |" in text
    [verdict] = [line for line in text.splitlines() if line.startswith("- async:")]
    assert "POSTs/s x limit 0.976 (met" in verdict
    assert "never submitted 2 (MISSED" in verdict
    assert "wall with kills / clean 1.22 (MISSED" in verdict


def test_submit_section_replaces_its_block_and_keeps_the_rest():
    first = with_section("# Benchmark results\n\nintro\n", "submit", submit.section(results()))
    again = with_section(first + "\ntail\n", "submit", submit.section(results()))
    assert again.count("<!-- bench:submit -->") == 1 and "intro" in again and "tail" in again
