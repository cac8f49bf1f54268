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

    def render(self, names: dict[str, str], values: dict[str, Value]) -> str:
        """The update's text, its clauses grouped by action, its placeholders added."""
        groups: dict[_Action, list[str]] = {}
        for attr, (action, template, operands) in self._clauses.items():
            names[f"#{attr}"] = attr.value
            slots = [f":u{len(values) + i}" for i in range(len(operands))]
            values |= zip(slots, operands, strict=True)
            groups.setdefault(action, []).append(template.format(f"#{attr}", *slots))
        return " ".join(
            f"{action} {', '.join(groups[action])}" for action in _ACTIONS if action in groups
        )


def _rendered(
    parameter: str,
    part: Condition | Update | tuple[Attr, ...],
    builder: ConditionExpressionBuilder,
    names: dict[str, str],
    values: dict[str, Any],
) -> str:
    if isinstance(part, Update):
        return part.render(names, values)
    if isinstance(part, tuple):  # a projection
        names |= {f"#{attr}": attr.value for attr in part}
        return ", ".join(f"#{attr}" for attr in part)
    built = builder.build_expression(part, is_key_condition=parameter == "KeyConditionExpression")
    names |= built.attribute_name_placeholders
    values |= built.attribute_value_placeholders
    return str(built.condition_expression)


def expressions(**parts: Condition | Update | tuple[Attr, ...] | None) -> dict[str, Any]:
    """The request parameters ``parts`` (None: left out; a condition, an ``Update`` or a
    projection) and the placeholders they use: ``#attr`` and ``:u0`` (conditions: boto3's)."""
    builder = ConditionExpressionBuilder()  # counts its placeholders: one per request
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    request: dict[str, Any] = {
        k: _rendered(k, v, builder, names, values) for k, v in parts.items() if v is not None
    }
    request["ExpressionAttributeNames"] = names  # every part names an attribute
    if values:
        request["ExpressionAttributeValues"] = {k: encode(v) for k, v in values.items()}
    return request


def state_is(move: lifecycle.Move) -> Condition:
    """The condition that a row is in one of ``move``'s from-states."""
    states = [s for s in move.sources if isinstance(s, JobState)]
    clauses: list[Condition] = []
    if lifecycle.ABSENT in move.sources:
        clauses.append(Field(Attr.PK).not_exists())
    if set(states) == set(JobState):
        clauses.append(Field(Attr.PK).exists())  # every state at all is "a row"
    elif states:
        clauses.append(Field(Attr.STATE).is_in(states))
    return reduce(or_, clauses)


__all__ = ("Condition", "Field", "Update", "expressions", "state_is")
