"""A request's expressions: conditions are boto3's (``Field(Attr.STATE).eq(...)``), updates a
small SET/REMOVE/ADD/DELETE composer; ``expressions`` renders both on one placeholder map."""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Literal, Self

from boto3.dynamodb.conditions import Attr as Field
from boto3.dynamodb.conditions import ConditionBase, ConditionExpressionBuilder

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.rows import Value, encode

type Condition = ConditionBase
type _Action = Literal["SET", "REMOVE", "ADD", "DELETE"]
_ACTIONS: tuple[_Action, ...] = ("SET", "REMOVE", "ADD", "DELETE")


class Update:
    """An update expression, one clause per attribute (a later one for it replaces it).

    A clause is a template: ``{0}`` is the attribute's placeholder, ``{1}``... its values'.
    """

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

    def render(self, names: dict[str, str], values: dict[str, Any]) -> str:
        """The update's text, clauses grouped by action; its placeholders added to the maps."""
        groups: dict[_Action, list[str]] = {action: [] for action in _ACTIONS}
        for attr, (action, template, operands) in self._clauses.items():
            name = f"#u{len(names)}"
            names[name] = attr.value
            placeholders = [f":u{len(values) + i}" for i in range(len(operands))]
            values.update(zip(placeholders, operands, strict=True))
            groups[action].append(template.format(name, *placeholders))
        return " ".join(f"{a} {', '.join(c)}" for a, c in groups.items() if c)


def expressions(
    *,
    condition: Condition | None = None,
    update: Update | None = None,
    key: Condition | None = None,
    filter: Condition | None = None,  # the request's own name
    projection: tuple[Attr, ...] = (),
) -> dict[str, Any]:
    """The request parameters of the parts given, with exactly the placeholders they use."""
    builder = ConditionExpressionBuilder()
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    request: dict[str, Any] = {}
    for parameter, part in (("ConditionExpression", condition), ("FilterExpression", filter)):
        if part is not None:
            built = builder.build_expression(part)
            request[parameter] = built.condition_expression
            names |= built.attribute_name_placeholders
            values |= built.attribute_value_placeholders
    if key is not None:
        built = builder.build_expression(key, is_key_condition=True)
        request["KeyConditionExpression"] = built.condition_expression
        names |= built.attribute_name_placeholders
        values |= built.attribute_value_placeholders
    if update is not None:
        request["UpdateExpression"] = update.render(names, values)
    if projection:
        names |= {f"#p{i}": attr.value for i, attr in enumerate(projection)}
        request["ProjectionExpression"] = ", ".join(f"#p{i}" for i in range(len(projection)))
    if names:
        request["ExpressionAttributeNames"] = {k: str(v) for k, v in names.items()}
    if values:
        request["ExpressionAttributeValues"] = {k: encode(v) for k, v in values.items()}
    return request


def state_is(move: lifecycle.Move) -> Condition:
    """The state part of ``move``'s condition, from its from-states in the lifecycle table."""
    present = [state for state in move.sources if isinstance(state, JobState)]
    clauses: list[Condition] = []
    if lifecycle.ABSENT in move.sources:
        clauses.append(Field(Attr.PK).not_exists())
    if set(present) == set(JobState):
        clauses.append(Field(Attr.PK).exists())  # every state at all is "a row"
    elif len(present) == 1:
        clauses.append(Field(Attr.STATE).eq(present[0]))
    elif present:
        clauses.append(Field(Attr.STATE).is_in(present))
    if not clauses:
        raise ValueError(f"{move.verb} moves no row: it has no from-state")
    first, *others = clauses
    for clause in others:
        first = first | clause
    return first


__all__ = ("Condition", "Field", "Update", "expressions", "state_is")
