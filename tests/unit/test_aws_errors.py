"""botocore's errors are read in one place: the refusals a conditional write expects, by code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from urllib3.exceptions import NewConnectionError

from scrape_pipeline.aws_errors import (
    is_condition_failed,
    is_no_such_key,
    is_precondition_failed,
    is_transaction_canceled,
    is_write_conflict,
    refused_item,
    unavailable,
)

RUNTIME = Path(__file__).parents[2] / "layers" / "shared" / "scrape_pipeline"
ITEM = {"pk": {"S": "extract#job-1"}, "state": {"S": "DONE"}}


def client_error(code: str, operation: str = "PutItem", **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "x"}, **extra}, operation)  # type: ignore[typeddict-item]


def test_aws_errors_condition_failed_carries_the_item_it_found():
    # GIVEN DynamoDB refusing a write with ReturnValuesOnConditionCheckFailure=ALL_OLD
    refused = client_error("ConditionalCheckFailedException", Item=ITEM)
    # THEN it reads as a refusal, with the item as it was
    assert is_condition_failed(refused)
    assert refused_item(refused) == ITEM
    # AND a refusal of a write to a missing row carries nothing
    assert refused_item(client_error("ConditionalCheckFailedException")) is None


@pytest.mark.parametrize(
    "exc",
    [
        client_error("ProvisionedThroughputExceededException", Item=ITEM),
        client_error("PreconditionFailed"),
        EndpointConnectionError(endpoint_url="http://localhost:1"),
    ],
)
def test_aws_errors_other_failures_are_no_condition_refusal(exc: Exception):
    assert not is_condition_failed(exc)
    assert refused_item(exc) is None


@pytest.mark.parametrize(
    ("code", "already_there", "conflict"),
    [
        ("PreconditionFailed", True, False),
        ("412", True, False),
        ("ConditionalRequestConflict", False, True),
        ("409", False, True),
        ("SlowDown", False, False),
    ],
)
def test_aws_errors_s3_conditional_put_answers(code: str, already_there: bool, conflict: bool):
    exc = client_error(code, "PutObject")
    assert is_precondition_failed(exc) is already_there
    assert is_write_conflict(exc) is conflict


@pytest.mark.parametrize(
    ("code", "operation", "canceled", "absent"),
    [
        ("TransactionCanceledException", "TransactWriteItems", True, False),
        ("NoSuchKey", "GetObject", False, True),
        ("404", "GetObject", False, True),
        ("AccessDenied", "GetObject", False, False),  # no s3:ListBucket: absence looks so
    ],
)
def test_aws_errors_transactions_and_missing_objects(
    code: str, operation: str, canceled: bool, absent: bool
):
    exc = client_error(code, operation)
    assert is_transaction_canceled(exc) is canceled
    assert is_no_such_key(exc) is absent
    assert not is_no_such_key(EndpointConnectionError(endpoint_url="http://localhost:1"))


def test_aws_errors_is_the_only_runtime_module_reading_error_codes():
    # GIVEN every runtime module but aws_errors itself
    codes = re.compile(
        r"ConditionalCheckFailed|PreconditionFailed|ConditionalRequestConflict"
        r"|\berror_code\(|\.response\b"
    )
    offenders = [
        f"{path.relative_to(RUNTIME)}:{number}"
        for path in sorted(RUNTIME.rglob("*.py"))
        if path.name != "aws_errors.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if codes.search(line)
    ]
    # THEN none of them matches an AWS error code or reads a botocore response by hand
    assert offenders == []


def _refused(url: str, socket_error: str) -> EndpointConnectionError:
    # As botocore raises it: urllib3's error, whose text carries the socket's, wrapped.
    error = NewConnectionError(None, f"Failed to establish a new connection: {socket_error}")  # type: ignore[arg-type]
    return EndpointConnectionError(endpoint_url=url, error=error)


@pytest.mark.parametrize(
    ("exc", "detail"),
    [
        (
            _refused("http://127.0.0.1:4566/", "[Errno 111] Connection refused"),
            "cannot reach 127.0.0.1:4566: connection refused",
        ),
        (
            _refused(
                "https://dynamodb.eu-west-3.amazonaws.com/", "[Errno -2] Name or service not known"
            ),
            "cannot reach dynamodb.eu-west-3.amazonaws.com: name or service not known",
        ),
        (
            ConnectTimeoutError(endpoint_url="https://sqs.us-east-1.amazonaws.com/"),
            "cannot reach sqs.us-east-1.amazonaws.com: no connection in time",
        ),
        (
            ReadTimeoutError(endpoint_url="https://s3.amazonaws.com/b"),
            "s3.amazonaws.com: no answer in time",
        ),
        (
            ConnectionClosedError(endpoint_url="https://s3.amazonaws.com/b"),
            "s3.amazonaws.com: connection lost before an answer",
        ),
    ],
)
def test_aws_errors_a_network_failure_names_the_host_and_the_cause(exc: Exception, detail: str):
    # WHEN a call never got an answer from AWS
    wrapped = unavailable("dynamodb", "Scan", exc)  # type: ignore[arg-type]
    # THEN its one line says where and why, beside the code
    assert wrapped.detail == detail
    assert str(wrapped) == f"dynamodb Scan failed: {type(exc).__name__}: {detail}"


def test_aws_errors_an_aws_refusal_keeps_its_message_out_of_the_line():
    # GIVEN AWS answering (not a network failure): its free text stays out of what Lambdas log
    wrapped = unavailable("sqs", "SendMessage", client_error("ThrottlingException"))
    assert str(wrapped) == "sqs SendMessage failed: ThrottlingException"
