"""A request's expressions: conditions are boto3's (``Field(Attr.STATE).eq(...)``), updates a
small SET/REMOVE/ADD/DELETE composer; ``expressions`` renders both on one placeholder map."""

from __future__ import annotations

from collections.abc import Set
from functools import reduce
from operator import or_
from typing import Any, Literal, Self

from boto3.dynamodb.conditions import Attr as Field
from boto3.dynamodb.conditions import ConditionBase, ConditionExpressionBuilder

from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.rows import Value, encode

type Condition = ConditionBase
type _Action = Literal["SET", "REMOVE", "ADD", "DELETE"]
_ACTIONS: tuple[_Action, ...] = ("SET", "REMOVE", "ADD", "DELETE")


class _Placeholders:
    """One request's ``#name`` and ``:value`` maps, shared by every expression it renders."""

    def __init__(self) -> None:
        self.builder = ConditionExpressionBuilder()
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attr: Attr, prefix: str) -> str:
        """A new placeholder for ``attr`` (``#u3``)."""
        placeholder = f"#{prefix}{len(self.names)}"
        self.names[placeholder] = attr.value
        return placeholder

    def value(self, value: Value) -> str:
        """A new placeholder for ``value`` (``:u4``)."""
        placeholder = f":u{len(self.values)}"
        self.values[placeholder] = value
        return placeholder

    def condition(self, condition: Condition, *, key: bool) -> str:
        built = self.builder.build_expression(condition, is_key_condition=key)
        self.names |= built.attribute_name_placeholders
        self.values |= built.attribute_value_placeholders
        return str(built.condition_expression)

    def maps(self) -> dict[str, Any]:
        values = {k: encode(v) for k, v in self.values.items()}
        maps = {"ExpressionAttributeNames": self.names, "ExpressionAttributeValues": values}
        return {parameter: placeholders for parameter, placeholders in maps.items() if placeholders}


class Update:
    """An update expression, one clause per attribute (a later one replaces it): a template of
    the attribute's placeholder ``{0}`` and its values' ``{1}``..."""

    def __init__(self) -> None:
        self._clauses: dict[Attr, tuple[_Action, str, tuple[Value, ...]]] = {}

    def _put(self, attr: Attr, action: _Action, template: str, *values: Value) -> Self:
        self._clauses[attr] = (action, template, values)
        return self

    def set(self, attr: Attr, value: Value) -> Self:
        """``attr`` becomes ``value``."""
        return self._put(attr, "SET", "{0} = {1}", value)

    def set_default(self, attr: Attr, value: Value) -> Self:
        """``attr`` becomes ``value`` unless the row has one already."""
        return self._put(attr, "SET", "{0} = if_not_exists({0}, {1})", value)

    def increment(self, attr: Attr) -> Self:
        """``attr`` counts one more (from zero where the row has none)."""
        return self._put(attr, "SET", "{0} = if_not_exists({0}, {1}) + {2}", 0, 1)

    def remove(self, *attrs: Attr) -> Self:
        """Each of ``attrs`` is removed from the row."""
        for attr in attrs:
            self._put(attr, "REMOVE", "{0}")
        return self

    def add(self, attr: Attr, members: Set[str]) -> Self:
        """``members`` join the set ``attr`` (created if the row has none)."""
        return self._put(attr, "ADD", "{0} {1}", members)

    def delete(self, attr: Attr, members: Set[str]) -> Self:
        """``members`` leave the set ``attr`` (one left empty is removed)."""
        return self._put(attr, "DELETE", "{0} {1}", members)

    def render(self, placeholders: _Placeholders) -> str:
        """The update's text, its clauses grouped by action."""
        groups: dict[_Action, list[str]] = {}
        for attr, (action, template, operands) in self._clauses.items():
            name = placeholders.name(attr, "u")
            clause = template.format(name, *map(placeholders.value, operands))
            groups.setdefault(action, []).append(clause)
        return " ".join(
            f"{action} {', '.join(groups[action])}" for action in _ACTIONS if action in groups
        )


def _rendered(parameter: str, part: Condition | Update | tuple[Attr, ...], p: _Placeholders) -> str:
    if isinstance(part, Update):
        return part.render(p)
    if isinstance(part, tuple):  # a projection
        return ", ".join(p.name(attr, "p") for attr in part)
    return p.condition(part, key=parameter == "KeyConditionExpression")


def expressions(**parts: Condition | Update | tuple[Attr, ...] | None) -> dict[str, Any]:
    """The request parameters ``parts`` (None: left out; a condition, an ``Update`` or a
    projection) and the placeholders they use."""
    placeholders = _Placeholders()
    request = {k: _rendered(k, part, placeholders) for k, part in parts.items() if part is not None}
    return request | placeholders.maps()


def state_is(move: lifecycle.Move) -> Condition:
    """The condition that a row is in one of ``move``'s from-states."""
    absent = [Field(Attr.PK).not_exists()] if lifecycle.ABSENT in move.sources else []
    clauses = absent + _in_states([s for s in move.sources if isinstance(s, JobState)])
    if not clauses:
        raise ValueError(f"{move.verb} moves no row: it has no from-state")
    return reduce(or_, clauses)


def _in_states(states: list[JobState]) -> list[Condition]:
    if not states:
        return []
    if set(states) == set(JobState):
        return [Field(Attr.PK).exists()]  # every state at all is "a row"
    state = Field(Attr.STATE)
    return [state.eq(states[0]) if len(states) == 1 else state.is_in(states)]


__all__ = ("Condition", "Field", "Update", "expressions", "state_is")
