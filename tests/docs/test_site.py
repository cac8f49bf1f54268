"""The documentation site's build catches what a reader would trip on, and its hook keeps links.

``make docs`` builds the site with ``--strict``; here a copy of the docs with one fault each
is built the same way and must fail, naming it. The hook's link rewriting is checked pure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs.hooks import DOCS, README, relinked

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


def _build(tree: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``tree`` (a copy of the repository's docs), as make docs."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'layers' / 'shared'}{os.pathsep}{REPO}",
        "NO_MKDOCS_2_WARNING": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tree / "site")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The site's sources (mkdocs.yml, docs/, the README) copied, beside a copy of one file a
    page links to out of docs/."""
    for name in ("mkdocs.yml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "bench").mkdir()
    shutil.copy2(REPO / "bench" / "RESULTS.md", tmp_path / "bench" / "RESULTS.md")
    (tmp_path / "events").mkdir()
    shutil.copy2(REPO / "events" / "README.md", tmp_path / "events" / "README.md")
    return tmp_path


# A broken link of each kind, and what the build says of it.
BROKEN = {
    "[the events](events.md#no-such-heading)": "does not contain an anchor '#no-such-heading'",
    "[here](#no-such-heading)": "there is no such anchor on this page",
    "[gone](no-such-page.md)": "not found among documentation files",
    "[outside](../bench/NO-SUCH.md)": "no such file in the repository",
}


def test_a_broken_link_or_anchor_fails_the_strict_build(tree: Path):
    # GIVEN the docs with a broken link of each kind added to a page
    page = tree / "docs" / "limits.md"
    page.write_text(page.read_text() + "".join(f"\nSee {link}.\n" for link in BROKEN))
    # WHEN the site is built as make docs builds it
    built = _build(tree)
    # THEN the build fails, naming each fault
    assert built.returncode != 0, built.stdout + built.stderr
    missed = [link for link, said in BROKEN.items() if said not in built.stderr]
    assert not missed, built.stderr


def test_links_out_of_docs_become_the_home_page_or_plain_text():
    page = DOCS / "events.md"
    text = "[a](../README.md#the-two-commands) [b](../bench/RESULTS.md) [c](lifecycle.md#x)"
    # A README link goes to the site's home; a repository file without a repo_url is its text
    assert relinked(text, page, None) == "[a](index.md#the-two-commands) b [c](lifecycle.md#x)"
    # AND with a repo_url it is the repository's copy
    assert "(https://example.org/r/blob/main/bench/RESULTS.md)" in relinked(
        text, page, "https://example.org/r"
    )
    # AND the README's own links into docs/ are made relative to docs/, code blocks untouched
    readme = "[x](docs/cli.md#the-local-stack-as-an-operator)\n```\n[y](docs/cli.md)\n```\n"
    assert relinked(readme, README, None) == (
        "[x](cli.md#the-local-stack-as-an-operator)\n```\n[y](docs/cli.md)\n```\n"
    )
