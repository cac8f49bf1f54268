"""bench.submit measuring one mode: the other's saved figures kept, each mode dated (no run)."""

from __future__ import annotations

from typing import Any

from bench import submit
from tests.bench.test_submit_bench import results, run


def fresh_batch() -> dict[str, Any]:
    """A batch-only measurement, with its operator steps' counts."""
    kills = run(kills=9, wall_s=41.0, adopted_by_submit=17, adopted_by_resolve=7, reposted=4)
    now = {"date": "2026-12-02T17:46:49Z", "load_before": [2.8], "load_after": [6.7]}
    return {
        **results(),
        **now,
        "modes": ["batch"],
        "runs": {
            "batch": {
                "clean": run(wall_s=40.0),
                "kills": {**kills, "complete_wall_s": 73.7},
                "kill_wall_ratio": 1.025,
                "complete_wall_ratio": 1.843,
            }
        },
        "measured": {"batch": now},
    }


def test_submit_one_mode_keeps_the_other_s_saved_runs_and_dates_each():
    # GIVEN a saved async measurement (an older file: one date for all) and a fresh batch one
    saved, fresh = results(), fresh_batch()
    # WHEN merged
    out = submit.merged(saved, fresh)
    # THEN both modes, in their order, each with its own run figures and date
    assert out["modes"] == ["async", "batch"]
    assert out["runs"]["async"] == saved["runs"]["async"]
    assert out["runs"]["batch"] == fresh["runs"]["batch"]
    assert out["measured"]["async"]["date"] == "2026-12-02T14:00:00Z"
    assert out["measured"]["batch"]["date"] == "2026-12-02T17:46:49Z"
    text = submit.section(out)
    assert "async 2026-12-02T14:00:00Z" in text and "batch 2026-12-02T17:46:49Z" in text
    # the batch kill row has its counts; the async rows, measured before them, blanks
    assert "| 1.025x | 17 + 7 | 4 | 73.7 |" in text
    assert "| 1.22x |  | |  |" in text
    [verdict] = [line for line in text.splitlines() if line.startswith("- batch:")]
    assert "to complete / clean 1.843 (MISSED" in verdict


def test_submit_one_mode_does_not_mix_in_a_file_measured_under_other_settings():
    saved = {**results(), "lost_share": 0.05}
    assert submit.merged(saved, fresh_batch())["modes"] == ["batch"]
    assert submit.merged(None, fresh_batch())["modes"] == ["batch"]
