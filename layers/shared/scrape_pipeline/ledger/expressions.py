"""Condition and update expressions of the ledger's writes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.rows import _s

# The clauses that may follow an update's SET clause.
_AFTER_SET = re.compile(r" (?=(?:REMOVE|ADD|DELETE) )")


def _stamped(update: str) -> str:
    """``update`` with ``updated_at`` and the TTL set too: a row expires after its last change."""
    set_part, *rest = _AFTER_SET.split(update, maxsplit=1)
    return f"{set_part}, #updated = :now, #ttl = :ttl" + (f" {rest[0]}" if rest else "")


def _used(expressions: str, names: Mapping[str, str]) -> dict[str, str]:
    """The ``#name`` placeholders that ``expressions`` mention."""
    return {k: v for k, v in names.items() if re.search(re.escape(k) + r"\b", expressions)}


def _state_value(state: JobState) -> str:
    """The placeholder of ``state``'s value in conditions and updates alike (``:enqueued``)."""
    return f":{state.value.lower()}"


def _state_is(move: lifecycle.Move) -> tuple[str, dict[str, Any]]:
    """The state part of ``move``'s condition, from its from-states in the lifecycle table, and
    the values it names. "No row" is ``attribute_not_exists(#pk)``; any state at all is "a row".
    """
    present = [state for state in move.sources if state is not lifecycle.ABSENT]
    clauses = ["attribute_not_exists(#pk)"] if lifecycle.ABSENT in move.sources else []
    if set(present) == set(JobState):
        return " OR ".join([*clauses, "attribute_exists(#pk)"]), {}
    if len(present) == 1:
        clauses.append(f"#state = {_state_value(present[0])}")
    elif present:
        clauses.append(f"#state IN ({', '.join(map(_state_value, present))})")
    return " OR ".join(clauses), {_state_value(state): _s(state.value) for state in present}


def _both(state_is: str, guard: str) -> str:
    """``state_is AND guard``, the state part bracketed when it is a disjunction."""
    return f"({state_is}) AND {guard}" if " OR " in state_is else f"{state_is} AND {guard}"
