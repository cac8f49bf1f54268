"""The ledger package's public face: ``__all__`` is what the tree imports from it, nothing more.

The package's modules are split by role (``scrape_pipeline/ledger/``); everything outside it
but its own tests (``tests/ledger``) imports from ``scrape_pipeline.ledger`` alone, so the
split can change without a caller noticing. ``__all__`` holds exactly the names imported from
it somewhere in the tree, and the result types its ``Ledger`` methods return (a caller
annotating one needs it).
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections.abc import Iterator
from pathlib import Path

from scrape_pipeline import ledger
from scrape_pipeline.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "shared" / "scrape_pipeline" / "ledger"
OWN_TESTS = REPO / "tests" / "ledger"
TREES = ("layers", "functions", "scrape_pipeline_ops", "scrape_pipeline_local", "tests", "bench")


def _imports() -> Iterator[tuple[Path, str, str]]:
    """(file, module, name) of every ``from scrape_pipeline.ledger... import name`` outside
    the package."""
    for tree in TREES:
        for path in (REPO / tree).rglob("*.py"):
            if path.is_relative_to(PACKAGE) or ".venv" in path.parts:
                continue
            parsed = ast.parse(path.read_text(), filename=str(path))
            skipped = {id(statement) for statement in _annotation_only(parsed)}
            for node in ast.walk(parsed):
                if id(node) in skipped:
                    continue
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "scrape_pipeline.ledger"
                ):
                    for alias in node.names:
                        yield path, node.module or "", alias.name


def _annotation_only(tree: ast.Module) -> list[ast.stmt]:
    """The statements under ``if TYPE_CHECKING:``: a module that the ledger imports names
    ``ledger.rows`` there, so that no import circle is drawn (tests/packaging)."""
    return [
        statement
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for statement in node.body
    ]


def _returned_classes() -> set[str]:
    """The ledger's own classes that ``Ledger``'s public methods return."""
    found: set[str] = set()
    pending = [
        typing.get_type_hints(method).get("return")
        for name, method in inspect.getmembers(Ledger, inspect.isfunction)
        if not name.startswith("_")
    ]
    while pending:
        hint = pending.pop()
        pending.extend(typing.get_args(hint))
        if inspect.isclass(hint) and hint.__module__.startswith("scrape_pipeline.ledger"):
            found.add(hint.__name__)
    return found


def test_ledger_is_imported_from_its_package_never_from_its_modules():
    # GIVEN every import of the ledger outside its package
    # THEN each names the package, not one of its modules
    inside = sorted(
        f"{path.relative_to(REPO)}: {module}"
        for path, module, _ in _imports()
        if module != "scrape_pipeline.ledger" and not path.is_relative_to(OWN_TESTS)
    )
    assert inside == []


def test_ledger_all_is_what_the_tree_imports_and_the_types_ledger_returns():
    # GIVEN the names imported from the package, and the classes Ledger's methods return
    imported = {
        name
        for path, module, name in _imports()
        if module == "scrape_pipeline.ledger" and not path.is_relative_to(OWN_TESTS)
    }
    returned = _returned_classes()
    # THEN __all__ is exactly those, each one there
    assert {"LeaseResult", "Recorded", "RowCounts", "LedgerRow"} <= returned, "the walk broke"
    assert set(ledger.__all__) == imported | returned
    assert all(hasattr(ledger, name) for name in ledger.__all__)
