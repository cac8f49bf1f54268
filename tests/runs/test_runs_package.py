"""The runs package lives in the Lambda layer: it imports the runtime, never the ops."""

from __future__ import annotations

from pathlib import Path

from scrape_pipeline.runs import moves
from tests.support.runtime_imports import imported_names

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "shared" / "scrape_pipeline" / "runs"


def test_runs_package_imports_only_itself_the_runtime_and_the_standard_library():
    # GIVEN every import of every module of the package
    names = {name for path in PACKAGE.glob("*.py") for name in imported_names(path)}
    # THEN none reaches the rest of the operator tools or the local stack
    outside = sorted(
        n for n in names if n.startswith(("scrape_pipeline_ops", "scrape_pipeline_local", "bench"))
    )
    assert outside == []


def test_moves_table_has_one_move_per_verb_and_reaches_every_state():
    assert [m.verb for m in moves.MOVES] == list(moves.Verb)
    reached = {m.target for m in moves.MOVES if m.target} | {
        s for m in moves.MOVES for s in m.sources
    }
    assert reached == set(moves.EntryState)
    assert "| `expire` | posting | in_doubt |" in _markdown()


def test_moves_table_in_the_runs_page_is_the_code_s():
    readme = (REPO / "docs" / "runs.md").read_text()
    begin = (
        "<!-- runs-moves: rendered from layers/shared/scrape_pipeline/runs/moves.py, "
        "checked by tests -->\n"
    )
    block = readme.split(begin, 1)[1].split("<!-- /runs-moves -->", 1)[0]
    assert block == _markdown()


def _markdown() -> str:
    """The move table as markdown, one line per move (the runs page shows it)."""
    lines = ["| verb | from | to | guard | why |", "|---|---|---|---|---|"]
    for move in moves.MOVES:
        target = move.target.value if move.target else "(unchanged)"
        sources = ", ".join(s.value for s in move.sources)
        row = (f"`{move.verb}`", sources, target, move.guard.value or "—", move.why)
        lines.append(f"| {' | '.join(row)} |")
    return "\n".join(lines) + "\n"
