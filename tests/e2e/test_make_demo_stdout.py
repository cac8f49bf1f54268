"""``make demo``'s stdout is the demo's own output: make echoes no command line before it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_prints_nothing_of_its_own_on_stdout():
    # GIVEN the set-up done (.venv up to date, as the test run itself needs it): -o keeps make
    # from installing it again, which from a checkout newer than the stamp (a git worktree
    # sharing the .venv) would re-point the editable install at that checkout
    # WHEN `make demo` runs, asked only for its usage (the demo itself is tests/e2e/test_demo.py)
    done = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/bin/.installed", "demo", "DEMO_ARGS=--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # THEN stdout starts with the demo's own first line: no echoed recipe before it
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: demo"), done.stdout[:300]
    assert "scrape_pipeline_local.demo" not in done.stdout
