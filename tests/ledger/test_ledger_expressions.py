"""The ledger's expressions, pure (no DynamoDB): boto3's conditions and the update composer on
one request's placeholders, and the state part of every condition from the lifecycle table.

Whether DynamoDB obeys them is judged by the moto tests beside this one (``test_ledger_items``
pins the items every verb writes).
"""

from __future__ import annotations

from scrape_pipeline.jobs import JobState
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import Field, Update, expressions, state_is


def test_ledger_expressions_state_part_follows_the_lifecycle_table():
    # GIVEN the moves from no row, from one state, from several, and from any state
    cases = {
        lifecycle.RECORD: "attribute_not_exists(#n0)",
        lifecycle.REOPEN: "#n0 IN (:v0)",
        lifecycle.ENQUEUE: "#n0 IN (:v0, :v1, :v2)",
        lifecycle.ACQUIRE: "(attribute_not_exists(#n0) OR #n1 IN (:v0, :v1, :v2))",
        lifecycle.NOTE_LATE_WEBHOOK: "attribute_exists(#n0)",
    }
    for move, text in cases.items():
        # WHEN its state part is rendered
        request = expressions(ConditionExpression=state_is(move))
        # THEN it names exactly the move's from-states
        assert request["ConditionExpression"] == text, move
        states = [s for s in move.sources if isinstance(s, JobState)]
        values = request.get("ExpressionAttributeValues", {}).values()
        assert len(states) == len(JobState) or [v["S"] for v in values] == states


def test_ledger_expressions_update_shares_the_conditions_placeholders():
    # GIVEN an update that names the lease owner twice, removed then set, and a condition
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
    condition = Field(Attr.LEASE_UNTIL).lt(5.0) & ~Field(Attr.SEEN_DELIVERIES).contains("d3")
    # WHEN rendered in one request
    request = expressions(UpdateExpression=update, ConditionExpression=condition)
    # THEN the later clause for an attribute replaced the earlier, the actions are grouped,
    # and no placeholder of the update clashes with the condition's
    assert request["ConditionExpression"] == "(#n0 < :v0 AND (NOT contains(#n1, :v1)))"
    assert request["UpdateExpression"] == (
        "SET #state = :u1, #lease_owner = :u2, #releases = if_not_exists(#releases, :u3) + :u4,"
        " #source = if_not_exists(#source, :u5) REMOVE #lease_until ADD #seen_deliveries :u6"
        " DELETE #struck_by :u0"
    )
    names = request["ExpressionAttributeNames"]
    assert (names["#n0"], names["#lease_owner"], names["#lease_until"]) == (
        "lease_until",
        "lease_owner",
        "lease_until",
    )
    # AND values are encoded as the items are: floats to the millisecond, sets sorted
    values = request["ExpressionAttributeValues"]
    assert (values[":v0"], values[":u6"], values[":u1"]) == (
        {"N": "5.000"},
        {"SS": ["d1", "d2"]},
        {"S": "DONE"},
    )


def test_ledger_expressions_projection_and_absent_parts():
    request = expressions(ProjectionExpression=(Attr.PK, Attr.STATE), ConditionExpression=None)
    assert request == {
        "ProjectionExpression": "#pk, #state",
        "ExpressionAttributeNames": {"#pk": "pk", "#state": "state"},
    }


def test_ledger_expressions_every_move_has_a_from_state():
    assert all(move.sources for move in lifecycle.MOVES)  # so each has a condition (state_is)
