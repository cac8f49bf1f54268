"""The lifecycle table itself: pinned by a snapshot and by docs/lifecycle.md, and what it promises.

The table is the state machine the ledger obeys (``tests/ledger/test_ledger_lifecycle.py``)
and the property test checks moves against; a change to it must show as a diff of
``tests/unit/lifecycle.md`` and of docs/lifecycle.md's copy. After a deliberate change,
rewrite both:

    UPDATE_LIFECYCLE=1 .venv/bin/python -m pytest -n 0 tests/unit/test_lifecycle.py
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from itertools import product
from pathlib import Path

from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.lifecycle import ABSENT, MOVES, WAITING, RowState, Verb
from tests.support.ledger import Ledger, allows

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("lifecycle.md")
PAGE = ROOT / "docs" / "lifecycle.md"
BEGIN = "<!-- lifecycle: rendered from scrape_pipeline/ledger/lifecycle.py, checked by tests -->\n"
END = "<!-- /lifecycle -->\n"
UPDATE = "UPDATE_LIFECYCLE=1 .venv/bin/python -m pytest -n 0 tests/unit/test_lifecycle.py"


def _names(states: Sequence[RowState]) -> str:
    return ", ".join(state.value for state in states) or "(unchanged)"


def markdown() -> str:
    """The table as markdown: the waiting set, then one line per move."""
    lines = [
        f"Waiting states (for a message or evidence; the sweeps read them): {_names(WAITING)}.",
        "",
        "| verb | from | to | guard |",
        "|---|---|---|---|",
    ]
    for move in MOVES:
        row = (f"`{move.verb}`", _names(move.sources), _names(move.targets), move.guard or "—")
        lines.append(f"| {' | '.join(row)} |")
    return "\n".join(lines) + "\n"


def _node(state: RowState) -> str:
    return "[*]" if state is ABSENT else state.value


def mermaid() -> str:
    """The moves that change a row's state as a Mermaid ``stateDiagram-v2`` (no row: ``[*]``)."""
    edges: dict[tuple[str, str], dict[str, None]] = {}  # (from, to) -> verbs, in table order
    for move in MOVES:
        for source, target in product(move.sources, move.targets):
            edges.setdefault((_node(source), _node(target)), {})[move.verb.value] = None
    lines = ["stateDiagram-v2"]
    lines += [f"    {a} --> {b}: {', '.join(verbs)}" for (a, b), verbs in edges.items()]
    return "\n".join(lines) + "\n"


def rendered() -> str:
    """The table and its diagram as docs/lifecycle.md shows them."""
    return f"{markdown()}\n```mermaid\n{mermaid()}```\n"


def _readme_block(text: str) -> str | None:
    found = re.search(re.escape(BEGIN) + r"(.*?)" + re.escape(END), text, re.DOTALL)
    return found.group(1) if found else None


def test_lifecycle_table_matches_its_snapshot():
    if os.environ.get("UPDATE_LIFECYCLE"):
        SNAPSHOT.write_text(rendered())
    assert SNAPSHOT.read_text() == rendered(), (
        f"the lifecycle table changed: review the change, then run `{UPDATE}`"
    )


def test_lifecycle_page_shows_the_rendered_table_and_diagram():
    text = PAGE.read_text()
    assert _readme_block(text) is not None, f"{PAGE.name} has no block between {BEGIN!r}, {END!r}"
    if os.environ.get("UPDATE_LIFECYCLE"):
        text = text.replace(BEGIN + str(_readme_block(text)) + END, BEGIN + rendered() + END)
        PAGE.write_text(text)
    assert _readme_block(PAGE.read_text()) == rendered(), (
        f"{PAGE.name}'s lifecycle differs from scrape_pipeline/ledger/lifecycle.py: run `{UPDATE}`"
    )


def test_lifecycle_verbs_are_the_ledger_methods_that_make_them():
    for verb in Verb:
        assert callable(getattr(Ledger, verb.value, None)), f"Ledger has no method {verb}"


def test_lifecycle_done_is_left_only_by_reopen():
    elsewhere = [s for s in (ABSENT, *JobState) if s is not JobState.DONE]
    leaving = {m.verb for m in MOVES for s in elsewhere if allows(m, JobState.DONE, s)}
    assert leaving == {Verb.REOPEN}
    # A write that keeps the state keeps it: marking a DONE row leaves it DONE.
    note = next(m for m in MOVES if m.verb is Verb.NOTE_LATE_WEBHOOK)
    assert not note.targets and allows(note, JobState.DONE, JobState.DONE)


def test_lifecycle_only_acquire_takes_a_lease():
    leasing = {m.verb for m in MOVES if JobState.PROCESSING in m.targets}
    assert leasing == {Verb.ACQUIRE}


def test_lifecycle_every_state_is_reached_from_no_row_and_waiting_rows_can_move():
    reached: set[RowState] = {ABSENT}
    while True:
        more = {t for m in MOVES for t in m.targets if reached & set(m.sources)} - reached
        if not more:
            break
        reached |= more
    assert reached == {ABSENT, *JobState}
    for state in WAITING:
        assert any(allows(m, state, JobState.ENQUEUED) for m in MOVES), state
        assert any(allows(m, state, JobState.PROCESSING) for m in MOVES), state
