"""The README and docs/ point only at what the repository holds: links, anchors, tests named.

A reader of a fresh clone has nothing beside it, so every relative link (a file, a folder, a
``#heading`` of this page or another) must resolve inside the repository, every ``*.md`` named
in prose must be one of its files, and every test a failure table names must exist, down to
the function. Pure file reading: no network, no import of the code under test.
"""

from __future__ import annotations

import ast
import re
import subprocess
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", REPO / "events" / "README.md", *(REPO / "docs").glob("*.md")])
# The failure tables: each row's last cell names the tests that prove it.
FAILURE_TABLES = (
    (REPO / "docs" / "failures.md", "## The failure table"),
    (REPO / "docs" / "failures.md", "## Narrower cases"),
)
# A bare test file name in a failure table is under tests/pipeline/, as the tables say.
DEFAULT_TEST_DIR = REPO / "tests" / "pipeline"
CHAOS_MATRIX = REPO / "tests" / "chaos" / "test_chaos_matrix.py"

FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
MD_NAME = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Line:
    """One line of prose (outside fenced code) of a page, with its number."""

    page: Path
    number: int
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.number}"


def prose(page: Path) -> Iterator[Line]:
    """The page's lines outside fenced code blocks."""
    fenced = False
    for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(text.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            yield Line(page, number, text)


def without_code(text: str) -> str:
    """The line with its code spans blanked: a link inside backticks is not a link."""
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lowercased, markup dropped, punctuation
    other than ``-`` and ``_`` removed, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    kept = "".join(
        c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN" or c.isdigit()
    )
    return kept.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every anchor a page has: its headings' (duplicates numbered ``-1``, ``-2``, as GitHub
    does) and explicit ``<a name>`` / ``id`` ones."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose(page):
        found.update(HTML_ANCHOR.findall(line.text))
        heading = HEADING.match(line.text)
        if not heading:
            continue
        slug = github_anchor(heading.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


@cache
def tracked_files() -> frozenset[str]:
    """The repository's files (git's index), as paths from its root."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return frozenset(listed.splitlines())


def links() -> Iterator[tuple[Line, str]]:
    """Every link and image target of every page, with the line it is on."""
    for page in PAGES:
        for line in prose(page):
            text = without_code(line.text)
            for pattern in (LINK, IMAGE):
                for target in pattern.findall(text):
                    yield line, target


def unresolved(line: Line, target: str) -> str | None:
    """Why ``target`` does not resolve from ``line``'s page, or None when it does."""
    if SCHEME.match(target):
        return None  # a URL: outside by intent, not ours to check offline
    path_part, _, fragment = target.partition("#")
    page = line.page
    if path_part:
        resolved = (line.page.parent / unquote(path_part)).resolve()
        if not resolved.is_relative_to(REPO):
            return f"{target} leaves the repository"
        if not resolved.exists():
            return f"{target}: no such file in the repository"
        page = resolved
    if not fragment:
        return None
    if page.suffix != ".md" or page.is_dir():
        return f"{target}: an anchor into something that is not a markdown page"
    if unquote(fragment).lower() not in anchors(page):
        return f"{target}: {page.relative_to(REPO)} has no heading or anchor #{fragment}"
    return None


def test_every_relative_link_resolves_inside_the_repository():
    # GIVEN every link of the README, events/README.md and docs/
    broken = [f"{line.where()}: {why}" for line, t in links() if (why := unresolved(line, t))]
    # THEN each names a file of the repository, and each anchor a heading of its page
    assert not broken, "\n".join(broken)


def test_every_markdown_page_named_in_prose_is_in_the_repository():
    # GIVEN the pages' prose, code spans included ("see `docs/architecture.md`")
    names = {Path(f).name for f in tracked_files() if f.endswith(".md")}
    paths = {f for f in tracked_files() if f.endswith(".md")}
    outside = []
    for page in PAGES:
        for line in prose(page):
            text = re.sub(r"\b[a-zA-Z][\w+.-]*://\S+", "", line.text)  # URLs name other sites
            for name in MD_NAME.findall(text):
                from_page = (page.parent / name).resolve()
                known = name in paths or (
                    from_page.is_relative_to(REPO) and str(from_page.relative_to(REPO)) in paths
                )
                if not known and ("/" in name or Path(name).name not in names):
                    outside.append(f"{line.where()}: {name}")
    # THEN every one is a page a fresh clone has (not ../shared/docs/..., not field-notes.md)
    assert not outside, "\n".join(outside)


def table_rows(page: Path, heading: str) -> Iterator[tuple[Line, str]]:
    """The last cell of each row of the first table under ``heading``."""
    inside = started = False
    for line in prose(page):
        if line.text.startswith("#"):
            if inside and started:
                return
            inside = line.text.strip() == heading
            continue
        if inside and line.text.startswith("|"):
            started = True
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.text.strip())[1:-1]]
            if cells and not set(cells[-1]) <= set("-: ") and cells[-1] != "test":
                yield line, cells[-1]
        elif inside and started:
            return


@cache
def chaos_scenarios() -> frozenset[str]:
    """The names in ``MATRIX`` of tests/chaos/test_chaos_matrix.py, read without importing it."""
    tree = ast.parse(CHAOS_MATRIX.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MATRIX" for t in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    raise AssertionError("tests/chaos/test_chaos_matrix.py has no MATRIX")


@cache
def functions_defined(path: Path) -> frozenset[str]:
    """The functions a test file defines, at any depth (classes and helpers included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def named_test_file(name: str) -> Path | None:
    """A test file a table names: a path from the root, else a file of tests/pipeline/."""
    for candidate in (REPO / name, DEFAULT_TEST_DIR / name):
        if candidate.is_file() and candidate.is_relative_to(REPO / "tests"):
            return candidate
    return None


def missing_tests(cell: str) -> Iterator[str]:
    """What a row's test cell names that does not exist."""
    chaos = re.compile(r"chaos ((?:`[^`]+`(?:, )?)+)")
    current: Path | None = None
    for token in re.findall(r"`([^`]+)`", chaos.sub("", cell)):
        if token.startswith("["):
            continue  # another parameter of the function just named: `[batch]`
        name, _, function = token.partition("::")
        if name:
            current = named_test_file(name)
            if current is None:
                yield f"no test file {name}"
                continue
        if function:
            if current is None:
                yield f"{token} follows no test file"
                continue
            bare = function.split("[", 1)[0]
            if bare not in functions_defined(current):
                yield f"{current.relative_to(REPO)} has no {bare}"
    for names in chaos.findall(cell):
        for scenario in re.findall(r"`([^`]+)`", names):
            if scenario not in chaos_scenarios():
                yield f"no chaos scenario {scenario} in MATRIX"


@pytest.mark.parametrize(("page", "heading"), FAILURE_TABLES, ids=lambda v: str(v)[-20:])
def test_every_test_a_failure_table_names_exists(page: Path, heading: str):
    # GIVEN a failure table: each row names the tests that break that thing and judge it
    rows = list(table_rows(page, heading))
    assert len(rows) >= 20, f"{page.name}: the failure table under {heading!r}"
    # THEN each file, function and chaos scenario it names is in the repository
    wrong = [f"{line.where()}: {why}" for line, cell in rows for why in missing_tests(cell)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        (
            "Submissions at the API's limit (`make bench-submit`, not part of `make bench`)",
            "submissions-at-the-apis-limit-make-bench-submit-not-part-of-make-bench",
        ),
        ("`sam deploy --guided`, prompt by prompt", "sam-deploy---guided-prompt-by-prompt"),
        ("Inside AWS", "inside-aws"),
        ("Polling (`make bench-polling`)", "polling-make-bench-polling"),
        ("Où va l'été ? Ça 100 %", "où-va-lété--ça-100-"),
    ],
)
def test_github_anchor_follows_githubs_rules(heading: str, anchor: str):
    assert github_anchor(heading) == anchor


def test_a_broken_link_and_an_outside_page_are_caught(tmp_path: Path):
    # GIVEN a page beside the README with a link to a missing heading and one leaving the clone
    page = REPO / "docs" / "architecture.md"
    assert unresolved(Line(page, 1, ""), "../README.md#no-such-heading")
    assert unresolved(Line(page, 1, ""), "../../shared/docs/geonode-api.md")
    assert unresolved(Line(page, 1, ""), "failures.md#the-failure-table") is None
    # AND a test cell naming a function that is not there
    cell = "`test_failure_table.py::test_no_such_thing`; chaos `drop-20`, `no-such-scenario`"
    assert list(missing_tests(cell)) == [
        "tests/pipeline/test_failure_table.py has no test_no_such_thing",
        "no chaos scenario no-such-scenario in MATRIX",
    ]


@cache
def source_text() -> str:
    """Every tracked Python file, the template and the Makefile, as one text to search in."""
    parts = [
        (REPO / f).read_text(encoding="utf-8")
        for f in sorted(tracked_files())
        if f.endswith(".py") or f in ("template.yaml", "Makefile")
    ]
    return "\n".join(parts)


def test_every_setting_and_constant_docs_name_is_in_the_code():
    # GIVEN the names docs/ quotes as settings, constants and metrics (`MAX_ATTEMPTS`, ...)
    quoted = {
        (page, name)
        for page in sorted((REPO / "docs").glob("*.md"))
        for line in prose(page)
        for span in CODE_SPAN.findall(line.text)
        for name in re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", span[1])
    }
    assert quoted, "docs/ quotes no setting"
    # THEN each is declared or used somewhere in the code or the template, none invented
    text = source_text()
    unknown = sorted(f"{page.name}: {name}" for page, name in quoted if name not in text)
    assert not unknown, "\n".join(unknown)
