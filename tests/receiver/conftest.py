"""Fixtures for the receiver: moto in-process with the template's resources, events, secrets."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from functions.receiver import app as receiver_app
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline_ops.signing import sign
from tests.support.events import api_gateway_event
from tests.support.template import create_ledger_table, create_queues, create_secret

SECRET = "whsec_dGVzdC1zZWNyZXQtZm9yLXVuaXQtdGVzdHMtb25seQ"
TABLE = "ledger"
SECRET_NAME = "webhook-secrets"


def bundle(*secrets: tuple[str, str | None]) -> str:
    """A secret bundle as stored in Secrets Manager."""
    return json.dumps({"secrets": [{"value": v, "expires_at": e} for v, e in secrets]})


def stamp(moment: float | None = None) -> str:
    """Epoch seconds (default: now) as the envelope's ``timestamp`` shows them."""
    at = time.time() if moment is None else moment
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def delivery_body(
    job_id: str = "job-1",
    event: str = "extract_completed",
    *,
    sent_at: float | None = None,
    delivery_id: str = "dlv_1",
) -> bytes:
    """A delivery in the contract's envelope, stamped ``sent_at`` (default: now)."""
    envelope = {
        "event": event,
        "webhook_id": "wh_1",
        "delivery_id": delivery_id,
        "timestamp": stamp(sent_at),
        "data": {"job_id": job_id, "status": "completed"},
    }
    return json.dumps(envelope).encode()


@dataclass
class Stack:
    """The AWS side of the receiver, in moto."""

    dynamodb: Any
    sqs: Any
    secrets: Any
    queue_url: str
    dlq_url: str
    secret_arn: str

    def messages(self) -> list[dict[str, Any]]:
        """Every message now in the job queue (received, then made visible again)."""
        out: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30
            ).get("Messages", [])
            if not got:
                return out
            out.extend(json.loads(m["Body"]) for m in got)

    def rows(self) -> list[dict[str, Any]]:
        """Every ledger item."""
        return list(self.dynamodb.scan(TableName=TABLE)["Items"])


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """moto with the ledger, the queues and the secret; the receiver's env points at them."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        sqs = boto3.client("sqs")
        sm = boto3.client("secretsmanager")
        create_ledger_table(dynamodb, TABLE)
        queue_url, dlq_url = create_queues(sqs, "jobs")
        arn = create_secret(sm, SECRET_NAME, bundle((SECRET, None)))
        monkeypatch.setenv("LEDGER_TABLE_NAME", TABLE)
        monkeypatch.setenv("QUEUE_URL", queue_url)
        monkeypatch.setenv("WEBHOOK_SECRET_ID", arn)
        parameters.clear_caches()
        receiver_app.reset_receiver()
        yield Stack(dynamodb, sqs, sm, queue_url, dlq_url, arn)
        parameters.clear_caches()
        receiver_app.reset_receiver()


Invoke = Callable[..., dict[str, Any]]


class FakeContext:
    """The parts of a Lambda context that Powertools reads."""

    function_name = "receiver"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:receiver"
    aws_request_id = "req-1"


@pytest.fixture
def invoke() -> Invoke:
    """Call the real handler with a signed (or not) API Gateway proxy event."""

    def call(
        body: bytes,
        *,
        secret: str | None = SECRET,
        headers: dict[str, str] | None = None,
        config: SignatureConfig | None = None,
        now: float | None = None,
        **event_kwargs: Any,
    ) -> dict[str, Any]:
        import time

        sent = {"Content-Type": "application/json", "X-Webhook-Delivery-Id": "dlv_1"}
        if secret is not None:
            sent.update(
                sign(config or SignatureConfig(), body, secret, now or time.time(), msg_id="msg_1")
            )
        sent.update(headers or {})
        event = api_gateway_event(body, sent, **event_kwargs)
        response: dict[str, Any] = receiver_app.lambda_handler(event, FakeContext())
        return response

    return call


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Everything the receiver's Powertools logger writes during the test."""
    buffer = io.StringIO()
    handler = receiver_app.logger.registered_handler
    previous = handler.setStream(buffer)  # type: ignore[attr-defined]
    yield buffer
    handler.setStream(previous)  # type: ignore[attr-defined]
