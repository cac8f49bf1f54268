"""The ledger's expression builder, pure (no DynamoDB): what it renders for names and values.

Whether DynamoDB accepts and obeys what it renders is judged by the moto tests beside this one
(``test_ledger_items.py`` pins the items every verb writes); these pin the builder's own rules:
placeholders for exactly what is used, equal values shared, brackets where AND meets OR, one
clause per attribute, and the state part of every condition taken from the lifecycle table.
"""

from __future__ import annotations

import pytest

from scrape_pipeline import lifecycle
from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import (
    Projection,
    Update,
    any_of,
    below,
    between,
    equals,
    expressions,
    lacks,
    missing,
    one_of,
    state_is,
)


def test_ledger_expressions_state_part_follows_the_lifecycle_table():
    # GIVEN the moves from no row, from one state, from several, and from any state
    cases = {
        lifecycle.RECORD: "attribute_not_exists(#pk)",
        lifecycle.REOPEN: "#state = :v0",
        lifecycle.ENQUEUE: "#state IN (:v0, :v1, :v2)",
        lifecycle.ACQUIRE: "attribute_not_exists(#pk) OR #state IN (:v0, :v1, :v2)",
        lifecycle.NOTE_LATE_WEBHOOK: "attribute_exists(#pk)",
    }
    for move, text in cases.items():
        # WHEN its state part is rendered
        request = expressions(ConditionExpression=state_is(move))
        # THEN it names exactly the move's from-states
        assert request["ConditionExpression"] == text, move
        states = [s for s in move.sources if isinstance(s, JobState)]
        values = request.get("ExpressionAttributeValues", {}).values()
        assert len(states) == len(JobState) or [v["S"] for v in values] == states


def test_ledger_expressions_bracket_where_and_meets_or_and_share_equal_values():
    # GIVEN acquire's condition: free, or taken with an expired lease
    condition = state_is(lifecycle.ACQUIRE) | (
        state_is(lifecycle.TAKE_OVER) & below(Attr.LEASE_UNTIL, 5.0)
    )
    guarded = state_is(lifecycle.ACQUIRE) & equals(Attr.STATE, JobState.RECEIVED)
    # WHEN rendered
    request = expressions(ConditionExpression=condition)
    # THEN the conjunction inside the disjunction is bracketed, and each name is declared once
    assert request["ConditionExpression"] == (
        "attribute_not_exists(#pk) OR #state IN (:v0, :v1, :v2)"
        " OR (#state = :v3 AND #lease_until < :v4)"
    )
    assert request["ExpressionAttributeNames"] == {
        "#pk": "pk",
        "#state": "state",
        "#lease_until": "lease_until",
    }
    assert request["ExpressionAttributeValues"][":v4"] == {"N": "5.000"}
    # AND the disjunction inside a conjunction is bracketed; RECEIVED, used twice, is one value
    again = expressions(ConditionExpression=guarded)
    assert again["ConditionExpression"] == (
        "(attribute_not_exists(#pk) OR #state IN (:v0, :v1, :v2)) AND #state = :v0"
    )
    assert len(again["ExpressionAttributeValues"]) == 3


def test_ledger_expressions_leaf_clauses():
    cases = [
        (between(Attr.STATE_SINCE, 1, 2.5), "#state_since BETWEEN :v0 AND :v1"),
        (one_of(Attr.SOURCE, ["a", "b"]), "#source IN (:v0, :v1)"),
        (missing(Attr.REOPENS), "attribute_not_exists(#reopens)"),
        (lacks(Attr.SEEN_DELIVERIES, "d1"), "NOT contains(#seen_deliveries, :v0)"),
        (any_of(missing(Attr.REOPENS)), "attribute_not_exists(#reopens)"),
    ]
    for condition, text in cases:
        assert expressions(ConditionExpression=condition)["ConditionExpression"] == text
    assert expressions(KeyConditionExpression=between(Attr.STATE_SINCE, 1, 2.5))[
        "ExpressionAttributeValues"
    ] == {":v0": {"N": "1"}, ":v1": {"N": "2.500"}}


def test_ledger_expressions_update_has_one_clause_per_attribute_grouped_by_action():
    # GIVEN an update that names the lease owner twice, removed then set
    update = (
        Update()
        .delete(Attr.STRUCK_BY, {"w1"})
        .set(Attr.STATE, JobState.DONE)
        .remove(Attr.LEASE_OWNER, Attr.LEASE_UNTIL)
        .increment(Attr.RELEASES)
        .set_default(Attr.SOURCE, "sqs")
        .add(Attr.SEEN_DELIVERIES, {"d2", "d1"})
        .set(Attr.LEASE_OWNER, "w2")
    )
    # WHEN rendered
    request = expressions(UpdateExpression=update)
    # THEN the later clause for an attribute replaced the earlier, and the actions are grouped
    assert request["UpdateExpression"] == (
        "SET #state = :v0, #lease_owner = :v1, #releases = if_not_exists(#releases, :v2) + :v3,"
        " #source = if_not_exists(#source, :v4)"
        " REMOVE #lease_until ADD #seen_deliveries :v5 DELETE #struck_by :v6"
    )
    # AND sets are string sets, sorted; nothing unused is declared
    assert request["ExpressionAttributeValues"][":v5"] == {"SS": ["d1", "d2"]}
    assert set(request) == {
        "UpdateExpression",
        "ExpressionAttributeNames",
        "ExpressionAttributeValues",
    }


def test_ledger_expressions_projection_and_absent_parts():
    request = expressions(
        ProjectionExpression=Projection((Attr.PK, Attr.STATE)), ConditionExpression=None
    )
    assert request == {
        "ProjectionExpression": "#pk, #state",
        "ExpressionAttributeNames": {"#pk": "pk", "#state": "state"},
    }


def test_ledger_expressions_a_move_needs_a_from_state():
    with pytest.raises(ValueError, match="no from-state"):
        state_is(lifecycle.Move(lifecycle.Verb.RECORD, (), ()))
