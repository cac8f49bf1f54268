"""What the Lambda functions import, read from the source with ``ast`` (nothing is imported).

Starting from ``functions/*/app.py``, follows every ``import`` of the runtime package, lazy and
type-only ones included (a superset of what runs), down to the modules they reach.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS = REPO / "functions"
LAYER_ROOT = REPO / "layers" / "shared"
RUNTIME = "scrape_pipeline"


def _module_file(name: str) -> Path | None:
    path = LAYER_ROOT.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def imported_names(path: Path) -> set[str]:
    """Every dotted name a file imports (``from a import b`` gives ``a`` and ``a.b``)."""
    package = list(path.relative_to(REPO).parent.parts)
    if path.is_relative_to(LAYER_ROOT):
        package = list(path.relative_to(LAYER_ROOT).parent.parts)
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parent = package[: len(package) - node.level + 1] if node.level else []
            base = ".".join([*parent, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def handler_files() -> list[Path]:
    """Each function's handler module."""
    return sorted(FUNCTIONS.glob("*/app.py"))


def runtime_closure() -> dict[str, Path]:
    """The runtime modules the handlers reach, transitively: dotted name -> source file."""
    reached: dict[str, Path] = {}
    pending = [name for path in handler_files() for name in imported_names(path)]
    while pending:
        name = pending.pop()
        if name.split(".")[0] != RUNTIME:
            continue
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            module = ".".join(parts[:depth])
            path = _module_file(module)
            if path is not None and module not in reached:
                reached[module] = path
                pending.extend(imported_names(path))
    return reached
