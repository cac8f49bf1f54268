"""The least-privilege check's own parts: calls to IAM requests, and policy evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from scrape_pipeline_local.aws_calls import Call, resource_params
from tests.support.iam import (
    Request,
    allowed_actions,
    evaluate,
    requests_of,
    resource_matches,
    unused_grants,
)

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/ledger"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:jobs"


def call(service: str, operation: str, **params: Any) -> Call:
    return Call("processor", "invocation", service, operation, resource_params(params))


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        (call("dynamodb", "PutItem", TableName="ledger"), [Request("dynamodb:PutItem", TABLE)]),
        (
            call("dynamodb", "Query", TableName="ledger", IndexName="pending-by-state"),
            [Request("dynamodb:Query", f"{TABLE}/index/pending-by-state")],
        ),
        (
            call("dynamodb", "BatchGetItem", RequestItems={"ledger": {"Keys": []}}),
            [Request("dynamodb:BatchGetItem", TABLE)],
        ),
        (
            call(
                "dynamodb",
                "TransactWriteItems",
                TransactItems=[{"Put": {"TableName": "ledger"}}, {"Update": {"TableName": "t2"}}],
            ),
            [
                Request("dynamodb:PutItem", TABLE),
                Request("dynamodb:UpdateItem", TABLE.replace("ledger", "t2")),
            ],
        ),
        (
            call("sqs", "SendMessageBatch", QueueUrl="http://127.0.0.1:5000/123456789012/jobs"),
            [Request("sqs:SendMessage", QUEUE)],
        ),
        (
            call("sqs", "DeleteMessageBatch", QueueUrl="https://sqs.x/123456789012/jobs"),
            [Request("sqs:DeleteMessage", QUEUE)],
        ),
        (
            call("sqs", "GetQueueUrl", QueueName="jobs", QueueOwnerAWSAccountId="210987654321"),
            [Request("sqs:GetQueueUrl", QUEUE.replace("123456789012", "210987654321"))],
        ),
        (
            call("s3", "HeadObject", Bucket="b", Key="results/x"),
            [Request("s3:GetObject", "arn:aws:s3:::b/results/x")],
        ),
        (
            call("s3", "DeleteObject", Bucket="b", Key="k", VersionId="v1"),
            [Request("s3:DeleteObjectVersion", "arn:aws:s3:::b/k")],
        ),
        (
            call("s3", "ListObjectVersions", Bucket="b"),
            [Request("s3:ListBucketVersions", "arn:aws:s3:::b")],
        ),
        (
            call(
                "secretsmanager", "GetSecretValue", SecretId="arn:aws:secretsmanager:r:a:secret:s-1"
            ),
            [Request("secretsmanager:GetSecretValue", "arn:aws:secretsmanager:r:a:secret:s-1")],
        ),
    ],
)
def test_iam_requests_of_each_call(made: Call, expected: list[Request]):
    assert requests_of(made) == expected


def test_iam_resource_wildcards_span_separators():
    assert resource_matches(f"{TABLE}/index/*", f"{TABLE}/index/pending-by-state")
    assert not resource_matches(TABLE, f"{TABLE}/index/pending-by-state")
    assert resource_matches("arn:aws:s3:::b/dead-letters/*", "arn:aws:s3:::b/dead-letters/a/b.json")
    assert not resource_matches("arn:aws:s3:::b/dead-letters/*", "arn:aws:s3:::b/results/a")
    assert resource_matches("arn:aws:sqs:*:*:job?", QUEUE.replace("jobs", "job1"))
    assert not resource_matches("arn:aws:sqs:*:*:Jobs", QUEUE)  # case-sensitive


def test_iam_evaluate_allows_only_named_action_and_resource():
    documents = [policy(allow(["sqs:SendMessage*"], QUEUE))]
    assert evaluate(documents, Request("sqs:SendMessage", QUEUE)).allowed
    assert not evaluate(documents, Request("sqs:SendMessage", f"{QUEUE}-dlq")).allowed
    assert not evaluate(documents, Request("sqs:ReceiveMessage", QUEUE)).allowed


def test_iam_evaluate_explicit_deny_wins_across_policies():
    # GIVEN a managed-style Allow on every queue and a fence denying all but one
    documents = [
        policy(allow(["sqs:ReceiveMessage"], "*")),
        policy({"Effect": "Deny", "Action": "sqs:ReceiveMessage", "NotResource": QUEUE}),
    ]
    assert evaluate(documents, Request("sqs:ReceiveMessage", QUEUE)).allowed
    decision = evaluate(documents, Request("sqs:ReceiveMessage", f"{QUEUE}-other"))
    assert not decision.allowed
    assert "denied" in decision.reason


def test_iam_evaluate_not_action_and_wildcard_actions():
    documents = [policy({"Effect": "Allow", "NotAction": "dynamodb:Delete*", "Resource": TABLE})]
    assert evaluate(documents, Request("dynamodb:PutItem", TABLE)).allowed
    assert not evaluate(documents, Request("dynamodb:DeleteItem", TABLE)).allowed
    assert evaluate(
        [policy(allow("dynamodb:*Item", TABLE))], Request("dynamodb:GetItem", TABLE)
    ).allowed


def test_iam_evaluate_conditional_allow_does_not_grant():
    conditional = allow(
        "dynamodb:GetItem", TABLE, Condition={"Bool": {"aws:SecureTransport": "true"}}
    )
    assert not evaluate([policy(conditional)], Request("dynamodb:GetItem", TABLE)).allowed


def test_iam_evaluate_rejects_an_operation_that_is_not_an_action():
    # HeadObject is authorized by s3:GetObject: an unmapped operation must not pass silently
    decision = evaluate([policy(allow("*", "*"))], Request("s3:HeadObject", "arn:aws:s3:::b/k"))
    assert not decision.allowed
    assert "not an IAM action" in decision.reason


def test_iam_allowed_actions_expand_patterns_and_skip_denies():
    documents = [
        policy(allow("sqs:SendMessage*", QUEUE), allow(["s3:PutObject"], "*")),
        policy({"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"}),
    ]
    assert allowed_actions(documents) == {"sqs:sendmessage", "s3:putobject"}


def test_iam_unused_grants_name_resources_no_call_reached():
    # GIVEN Query granted on the table and its index, and calls that query the index only
    documents = [policy(allow("dynamodb:Query", [TABLE, f"{TABLE}/index/*"]) | {"Sid": "Q"})]
    made = [Request("dynamodb:Query", f"{TABLE}/index/pending-by-state")]
    # THEN the table grant is reported; an action no call used is left to allowed_actions
    assert unused_grants(documents, made) == [f"Q: dynamodb:query on {TABLE}"]
    assert unused_grants(documents, []) == []
