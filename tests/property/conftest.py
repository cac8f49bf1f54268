"""Property-based tests: one reproducible hypothesis profile, and the receiver's AWS in moto.

The profile is derandomized (the same examples on every run, on every machine) and keeps no
example database, so CI sees exactly what a developer sees. Each test sets its own example
count. ``HYPOTHESIS_PROFILE=property-explore`` draws new examples on every run instead: run it
a few times locally to look for failures the fixed examples miss. The costly tests (a whole
stack, or moto under a state machine) draw a quarter of their thorough count in ``make test``;
``-m slow`` and ``HYPOTHESIS_PROFILE=property-thorough`` (or ``property-explore``) draw it all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from hypothesis import HealthCheck, Phase, settings
from moto import mock_aws

from functions.receiver import app as receiver_app
from scrape_pipeline_local.create import create_ledger_table, create_queues, create_secret
from scrape_pipeline_local.moto_server import forget_cached_clients
from tests.conftest import OFFLINE_AWS_ENV

settings.register_profile(
    "property",
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    # No explain phase: it traces every line of a failing example, moto included, which makes
    # a failure take minutes to report. The shrunk example says enough.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "property-explore", parent=settings.get_profile("property"), derandomize=False
)
settings.register_profile("property-thorough", parent=settings.get_profile("property"))
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "property")
settings.load_profile(PROFILE)


def examples(thorough: int, *, slow: bool = False) -> int:
    """A costly test's example count: ``thorough`` in a ``-m slow`` variant (``slow``) or under
    a profile other than the default one, a quarter of it (at least 5) otherwise."""
    return thorough if slow or PROFILE != "property" else max(5, thorough // 4)


# The receiver under test: the template's default secret scheme, a body limit lowered so that
# bodies near and over it stay cheap to generate.
SECRET = "whsec_cHJvcGVydHktdGVzdHMtc2VjcmV0LXZhbHVl"
MAX_BODY_BYTES = 4096
TABLE = "property-ledger"


class FakeContext:
    """The parts of a Lambda context that Powertools reads."""

    function_name = "receiver"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:receiver"
    aws_request_id = "req-property"


@dataclass
class ReceiverStack:
    """The receiver's table, queue and secret in moto, shared by every example of a module."""

    dynamodb: Any
    sqs: Any
    queue_url: str
    dlq_url: str
    # Set by ``begin``, cleared once an example has seen the stack empty again: an example
    # that passed left nothing behind, so only one that failed costs the cleanup calls.
    dirty: bool = True

    def items(self) -> list[dict[str, Any]]:
        """Every ledger item (the table stays tiny: one scan page)."""
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**kwargs)
            out.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def drain(self, url: str | None = None) -> list[dict[str, Any]]:
        """Receive and delete every visible message: the check and the reset in one."""
        url = url or self.queue_url
        out: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0
            ).get("Messages", [])
            if not got:
                return out
            for message in got:
                out.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def begin(self) -> None:
        """Start an example from an empty table and empty queues."""
        if self.dirty:
            for item in self.items():
                self.dynamodb.delete_item(TableName=TABLE, Key={"pk": item["pk"]})
            self.drain()
            self.drain(self.dlq_url)
        self.dirty = True

    def clean(self) -> None:
        """The example checked that the table and the queue are empty (again)."""
        self.dirty = False


@pytest.fixture(scope="module")
def receiver_stack() -> Iterator[ReceiverStack]:
    """moto in-process with the template's table, queues and secret; the receiver wired to it.

    Module-scoped so hypothesis examples share it (they reset it themselves): a moto context per
    example would cost more than the examples.
    """
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        for name, value in OFFLINE_AWS_ENV.items():
            mp.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
            mp.delenv(name, raising=False)
        # Before the suite's per-test reset runs: no client an earlier module built may answer.
        forget_cached_clients()
        dynamodb = boto3.client("dynamodb")
        sqs = boto3.client("sqs")
        create_ledger_table(dynamodb, TABLE)
        queue_url, dlq_url = create_queues(sqs, "property-jobs")
        arn = create_secret(
            boto3.client("secretsmanager"),
            "property-webhook-secrets",
            json.dumps({"secrets": [{"value": SECRET, "expires_at": None}]}),
        )
        receiver_env = {
            "LEDGER_TABLE_NAME": TABLE,
            "QUEUE_URL": queue_url,
            "WEBHOOK_SECRET_ID": arn,
            "MAX_BODY_BYTES": str(MAX_BODY_BYTES),
        }
        for name, value in receiver_env.items():
            mp.setenv(name, value)
        parameters.clear_caches()
        receiver_app.reset_receiver()
        yield ReceiverStack(dynamodb, sqs, queue_url, dlq_url)
        parameters.clear_caches()
        receiver_app.reset_receiver()
