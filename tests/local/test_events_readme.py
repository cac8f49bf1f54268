"""``events/README.md``'s Python example runs as written, the way a reader would run it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "events" / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks() -> list[str]:
    """Every fenced ``python`` block of events/README.md, in order."""
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_events_readme_has_a_python_example_that_parses():
    # GIVEN the README's examples: there is one, and it is Python a reader can paste
    blocks = python_blocks()
    assert blocks, "events/README.md shows no python block"
    for block in blocks:
        ast.parse(block)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_events_readme_python_block_runs_from_the_repository_root(index: int):
    # GIVEN a fresh interpreter in the repository's root, with no AWS or pipeline setting
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GEONODE_"))}
    # WHEN the block runs as it is printed (imports included: nothing is added)
    done = subprocess.run(
        [sys.executable, "-c", python_blocks()[index]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    # THEN it ends cleanly and prints what its comment says: both records reported failed
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    [printed] = [line for line in done.stdout.splitlines() if line.startswith("[{")]
    failures = ast.literal_eval(printed)
    assert [f["itemIdentifier"][-4:] for f in failures] == ["0001", "0002"]
