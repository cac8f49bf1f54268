"""No import circle in the runtime package, TYPE_CHECKING imports counted: a module never imports
its importer, so each reads (and loads) without the modules built on it.

The graph is read from the source with ast: ``from a import b`` is an edge to ``a.b`` when that
is a module, else to ``a``; imports inside functions and ``if TYPE_CHECKING:`` count too.
"""

from __future__ import annotations

import ast
from collections.abc import Container
from pathlib import Path

PACKAGE = "scrape_pipeline"
ROOT = Path(__file__).resolve().parents[2] / "layers" / "shared" / PACKAGE
# Circles tolerated for now: none (issue 36 removed the last, runs.engine <-> runs.posting).
KNOWN_ELSEWHERE: list[list[str]] = []


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, here: str, modules: Container[str]) -> set[str]:
    """The package's modules one import statement loads (relative ones made absolute)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:
        anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    named = [f"{base}.{alias.name}" for alias in node.names]
    # ``from a import b``: the submodule a.b when b is one, else a itself.
    found = {name for name in named if name in modules}
    if len(found) < len(named) and base in modules:
        found.add(base)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        # A package's relative imports are anchored at itself, a module's at its package.
        here = name if path.name == "__init__.py" else name.rpartition(".")[0] or name
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _imported(node, here, modules)
        graph[name] = edges - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_runtime_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 50, "the package was not found"
    assert [c for c in circles(graph) if c not in KNOWN_ELSEWHERE] == []


def test_the_check_sees_a_circle_through_type_checking_imports(tmp_path: Path):
    # GIVEN a package whose report module imports its importer only for annotations
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "runner.py").write_text("from scrape_pipeline.report import Report\n")
    (package / "report.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from scrape_pipeline import runner\n"
    )
    (package / "alone.py").write_text("from . import report\n")
    # THEN the circle is found, and the module outside it is not in it
    assert circles(import_graph(package)) == [["scrape_pipeline.report", "scrape_pipeline.runner"]]
