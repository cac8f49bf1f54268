"""Conditions and updates built from attribute names and values, placeholders written for you.

    update = Update().set(Attr.STATE, JobState.ENQUEUED).increment(Attr.RELEASES)
    condition = state_is(lifecycle.RELEASE) & equals(Attr.LEASE_OWNER, owner)
    request = expressions(UpdateExpression=update, ConditionExpression=condition)

An expression names attributes and values only through placeholders (``#state``, ``:v0``).
``expressions`` renders every expression of one request against one set of them, so the
request carries exactly the names and values its expressions use (DynamoDB refuses any
other) and no ``#name`` map is typed by hand. The state part of a condition comes from the
lifecycle table (``state_is``); a move's guard is composed with it by ``&`` or ``|``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass
from functools import partial, reduce
from operator import and_, or_
from typing import Any, Literal, Protocol, Self

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.rows import Value, encode


class Placeholders:
    """The ``#name`` and ``:value`` placeholders of one request, each name and value once."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, dict[str, Any]] = {}

    def name(self, attr: Attr) -> str:
        """The placeholder of ``attr`` (``#state``)."""
        placeholder = f"#{attr.value}"
        self.names[placeholder] = attr.value
        return placeholder

    def value(self, value: Value) -> str:
        """The placeholder of ``value``, shared by every use of an equal value (``:v0``)."""
        encoded = encode(value)
        for placeholder, known in self.values.items():
            if known == encoded:
                return placeholder
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = encoded
        return placeholder


class Expression(Protocol):
    """A part of a request written with placeholders: a condition, an update, a projection."""

    def render(self, placeholders: Placeholders) -> str:
        """The expression's text, its names and values registered with ``placeholders``."""
        ...


def expressions(**parts: Expression | None) -> dict[str, Any]:
    """The request parameters ``parts`` (by name; None: left out) and the placeholders they use."""
    placeholders = Placeholders()
    request: dict[str, Any] = {
        parameter: part.render(placeholders)
        for parameter, part in parts.items()
        if part is not None
    }
    if placeholders.names:
        request["ExpressionAttributeNames"] = placeholders.names
    if placeholders.values:
        request["ExpressionAttributeValues"] = placeholders.values
    return request


type _Render = Callable[[Placeholders], str]
type _Operator = Literal["", "AND", "OR"]


@dataclass(frozen=True)
class Condition:
    """A condition: one clause, or conditions joined by ``&`` (AND) or ``|`` (OR)."""

    _render: _Render
    _operator: _Operator = ""

    def __and__(self, other: Condition) -> Condition:
        return _joined("AND", (self, other))

    def __or__(self, other: Condition) -> Condition:
        return _joined("OR", (self, other))

    def render(self, placeholders: Placeholders) -> str:
        """The condition's text (``Expression``)."""
        return self._render(placeholders)


def _joined(operator: _Operator, conditions: tuple[Condition, ...]) -> Condition:
    def render(p: Placeholders) -> str:
        # A part joined by the other operator is bracketed: it reads as it evaluates.
        parts = (
            c.render(p) if c._operator in ("", operator) else f"({c.render(p)})" for c in conditions
        )
        return f" {operator} ".join(parts)

    return Condition(render, operator)


def all_of(first: Condition, *others: Condition) -> Condition:
    """Every one of the conditions holds."""
    return reduce(and_, others, first)


def any_of(first: Condition, *others: Condition) -> Condition:
    """At least one of the conditions holds."""
    return reduce(or_, others, first)


def equals(attr: Attr, value: Value) -> Condition:
    """``attr`` is ``value``."""
    return Condition(lambda p: f"{p.name(attr)} = {p.value(value)}")


def below(attr: Attr, value: Value) -> Condition:
    """``attr`` is less than ``value``."""
    return Condition(lambda p: f"{p.name(attr)} < {p.value(value)}")


def between(attr: Attr, low: Value, high: Value) -> Condition:
    """``attr`` is from ``low`` to ``high``, both included."""
    return Condition(lambda p: f"{p.name(attr)} BETWEEN {p.value(low)} AND {p.value(high)}")


def one_of(attr: Attr, values: Iterable[Value]) -> Condition:
    """``attr`` is one of ``values``."""
    return Condition(lambda p: f"{p.name(attr)} IN ({', '.join(map(p.value, values))})")


def exists(attr: Attr) -> Condition:
    """The item has ``attr`` (for the key: there is a row)."""
    return Condition(lambda p: f"attribute_exists({p.name(attr)})")


def missing(attr: Attr) -> Condition:
    """The item lacks ``attr`` (for the key: there is no row)."""
    return Condition(lambda p: f"attribute_not_exists({p.name(attr)})")


def lacks(attr: Attr, member: str) -> Condition:
    """The set ``attr`` does not hold ``member`` (or the item has no such set)."""
    return Condition(lambda p: f"NOT contains({p.name(attr)}, {p.value(member)})")


def state_is(move: lifecycle.Move) -> Condition:
    """The state part of ``move``'s condition, from its from-states in the lifecycle table.

    "No row" is ``attribute_not_exists(pk)``; every state at all is "a row".
    """
    present = [state for state in move.sources if isinstance(state, JobState)]
    clauses = [missing(Attr.PK)] if lifecycle.ABSENT in move.sources else []
    if set(present) == set(JobState):
        clauses.append(exists(Attr.PK))
    elif len(present) == 1:
        clauses.append(equals(Attr.STATE, present[0]))
    elif present:
        clauses.append(one_of(Attr.STATE, present))
    if not clauses:
        raise ValueError(f"{move.verb} moves no row: it has no from-state")
    return any_of(*clauses)


def _name_of(attr: Attr, placeholders: Placeholders) -> str:
    return placeholders.name(attr)


type _Action = Literal["SET", "REMOVE", "ADD", "DELETE"]
_ACTIONS: tuple[_Action, ...] = ("SET", "REMOVE", "ADD", "DELETE")


class Update:
    """An update expression, one clause per attribute (a later one for it replaces it)."""

    def __init__(self) -> None:
        self._clauses: dict[Attr, tuple[_Action, _Render]] = {}

    def set(self, attr: Attr, value: Value) -> Self:
        """``attr`` becomes ``value``."""
        self._clauses[attr] = ("SET", lambda p: f"{p.name(attr)} = {p.value(value)}")
        return self

    def set_default(self, attr: Attr, value: Value) -> Self:
        """``attr`` becomes ``value`` unless the row has one already."""

        def render(p: Placeholders) -> str:
            name = p.name(attr)
            return f"{name} = if_not_exists({name}, {p.value(value)})"

        self._clauses[attr] = ("SET", render)
        return self

    def increment(self, attr: Attr) -> Self:
        """``attr`` counts one more (from zero where the row has none)."""

        def render(p: Placeholders) -> str:
            name = p.name(attr)
            return f"{name} = if_not_exists({name}, {p.value(0)}) + {p.value(1)}"

        self._clauses[attr] = ("SET", render)
        return self

    def remove(self, *attrs: Attr) -> Self:
        """Each of ``attrs`` is removed from the row."""
        for attr in attrs:
            self._clauses[attr] = ("REMOVE", partial(_name_of, attr))
        return self

    def add(self, attr: Attr, members: Set[str]) -> Self:
        """``members`` join the set ``attr`` (created if the row has none)."""
        self._clauses[attr] = ("ADD", lambda p: f"{p.name(attr)} {p.value(members)}")
        return self

    def delete(self, attr: Attr, members: Set[str]) -> Self:
        """``members`` leave the set ``attr`` (one left empty is removed)."""
        self._clauses[attr] = ("DELETE", lambda p: f"{p.name(attr)} {p.value(members)}")
        return self

    def render(self, placeholders: Placeholders) -> str:
        """The update's text, its clauses grouped by action (``Expression``)."""
        groups = []
        for action in _ACTIONS:
            clauses = [render(placeholders) for a, render in self._clauses.values() if a == action]
            if clauses:
                groups.append(f"{action} {', '.join(clauses)}")
        return " ".join(groups)


@dataclass(frozen=True)
class Projection:
    """The attributes a read returns."""

    attrs: tuple[Attr, ...]

    def render(self, placeholders: Placeholders) -> str:
        """The projection's text (``Expression``)."""
        return ", ".join(map(placeholders.name, self.attrs))


__all__ = (
    "Condition",
    "Expression",
    "Placeholders",
    "Projection",
    "Update",
    "all_of",
    "any_of",
    "below",
    "between",
    "equals",
    "exists",
    "expressions",
    "lacks",
    "missing",
    "one_of",
    "state_is",
)
