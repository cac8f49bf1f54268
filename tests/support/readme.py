"""Blocks of README.md rendered from code: found between two markers, rewritten on request."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(begin: str, end: str) -> str | None:
    """The README's text between ``begin`` and ``end``; None when the markers are missing."""
    found = re.search(re.escape(begin) + r"(.*?)" + re.escape(end), README.read_text(), re.DOTALL)
    return found.group(1) if found else None


def check_readme_block(begin: str, end: str, rendered: str, *, update: bool, fix: str) -> None:
    """Assert the block is ``rendered``; with ``update``, rewrite it first. ``fix``: the command
    the failure message tells to run."""
    block = readme_block(begin, end)
    assert block is not None, f"README.md has no block between {begin!r}, {end!r}"
    if update:
        README.write_text(README.read_text().replace(begin + block + end, begin + rendered + end))
    assert readme_block(begin, end) == rendered, (
        f"README.md's block {begin!r} is stale: run `{fix}`"
    )
