"""The test event (``ping``): answered 200 once its signature verifies, and nothing recorded."""

from __future__ import annotations

import json

import pytest

from tests.receiver.conftest import Invoke, Stack, stamp
from tests.support.events import response_json


def ping_body(**extra: object) -> bytes:
    """A test delivery as ``scrape-pipeline doctor`` sends it."""
    envelope = {
        "event": "ping",
        "webhook_id": None,
        "delivery_id": "doctor-1",
        "timestamp": stamp(),
        "data": {},
        **extra,
    }
    return json.dumps(envelope).encode()


def test_receiver_test_event_answers_200_and_records_nothing(
    stack: Stack, invoke: Invoke, capsys: pytest.CaptureFixture[str]
):
    # GIVEN a test delivery signed with a valid secret
    # WHEN it is delivered
    response = invoke(ping_body())
    # THEN it is acknowledged as a test, with no ledger row and no message
    assert response["statusCode"] == 200
    assert response_json(response) == {"status": "test", "event": "ping"}
    assert stack.rows() == [] and stack.messages() == []
    assert "WebhookTest" in capsys.readouterr().out


def test_receiver_test_event_with_a_job_id_still_records_nothing(stack: Stack, invoke: Invoke):
    # GIVEN a ping carrying a job id (in the header's event type too)
    body = ping_body(data={"job_id": "job-1", "status": "completed"})
    # WHEN it is delivered THEN it is a test all the same: no job is touched
    response = invoke(body, headers={"X-Webhook-Event": "ping"})
    assert response["statusCode"] == 200
    assert stack.rows() == [] and stack.messages() == []


def test_receiver_test_event_is_not_named_by_the_header(stack: Stack, invoke: Invoke):
    # GIVEN a signed body that names no event, and the unsigned header that says "ping"
    body = ping_body()
    no_event = {k: v for k, v in json.loads(body).items() if k != "event"}
    # WHEN it is delivered THEN the header is not read: it is no test, and no job either
    response = invoke(json.dumps(no_event).encode(), headers={"X-Webhook-Event": "ping"})
    assert response["statusCode"] == 400
    assert response_json(response) == {"error": "missing job id"}
    assert stack.rows() == [] and stack.messages() == []


def test_receiver_stale_test_event_is_401(stack: Stack, invoke: Invoke):
    # a ping is verified like a delivery, freshness included
    response = invoke(ping_body(timestamp="2026-05-27T08:16:09Z"))
    assert response["statusCode"] == 401


@pytest.mark.parametrize("secret", ["whsec_someone-else", None], ids=["forged", "unsigned"])
def test_receiver_forged_test_event_is_401(stack: Stack, invoke: Invoke, secret: str | None):
    # GIVEN a test delivery signed with a wrong secret, or not at all
    # WHEN it is delivered THEN the signature is checked first: 401, nothing recorded
    response = invoke(ping_body(), secret=secret)
    assert response["statusCode"] == 401
    assert response_json(response) == {"error": "invalid signature"}
    assert stack.rows() == [] and stack.messages() == []
