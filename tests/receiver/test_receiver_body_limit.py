"""The receiver's default body limit is what the platform can carry, not a lower cap of its own.

A REST API proxy integration with binary media ``*/*`` hands the body base64-encoded inside the
Lambda event, and a synchronous invocation takes at most 6 MiB of event: the largest body that
fits is the receiver's default, and one byte more is refused before any work.
"""

from __future__ import annotations

import json

from scrape_pipeline.receiver.webhook import (
    LAMBDA_SYNC_PAYLOAD_BYTES,
    PLATFORM_MAX_BODY_BYTES,
    ReceiverSettings,
)
from tests.receiver.conftest import Invoke, Stack, stamp
from tests.support.events import api_gateway_event, response_json

# API Gateway REST: request line and headers together are at most this (its published quota).
API_GATEWAY_HEADER_BYTES = 10_240


def padded_delivery(job_id: str, size: int) -> bytes:
    """An extract_completed delivery of exactly ``size`` bytes (the markdown is the padding)."""
    envelope: dict[str, object] = {
        "event": "extract_completed",
        "timestamp": stamp(),
        "data": {"job_id": job_id, "markdown": ""},
    }
    bare = len(json.dumps(envelope).encode())
    envelope["data"] = {"job_id": job_id, "markdown": "m" * (size - bare)}
    body = json.dumps(envelope).encode()
    assert len(body) == size
    return body


def test_receiver_default_limit_is_the_platform_ceiling():
    # GIVEN no MAX_BODY_BYTES in the environment
    settings = ReceiverSettings.from_env(
        {"LEDGER_TABLE_NAME": "t", "QUEUE_URL": "q", "WEBHOOK_SECRET_ID": "s"}
    )
    # THEN the limit is (6 MiB - event overhead) * 3/4, far above the old 256 KiB
    assert settings.max_body_bytes == PLATFORM_MAX_BODY_BYTES == 4_694_016
    assert PLATFORM_MAX_BODY_BYTES > 4 * 1024 * 1024


def test_receiver_largest_body_fits_one_lambda_event_with_the_largest_headers():
    # GIVEN a body at the limit and headers at API Gateway's header quota
    headers = {"Content-Type": "application/json", "X-Pad": "h" * (API_GATEWAY_HEADER_BYTES - 60)}
    event = api_gateway_event(b"x" * PLATFORM_MAX_BODY_BYTES, headers)
    # WHEN API Gateway builds the proxy event (headers twice, body base64)
    size = len(json.dumps(event).encode())
    # THEN the event stays within a synchronous invocation's payload limit
    assert size <= LAMBDA_SYNC_PAYLOAD_BYTES, size


def test_receiver_accepts_a_body_at_the_default_limit(stack: Stack, invoke: Invoke):
    # GIVEN a signed delivery of exactly the default limit (about 4.5 MiB)
    body = padded_delivery("big-1", PLATFORM_MAX_BODY_BYTES)
    # WHEN it arrives with the default settings
    response = invoke(body)
    # THEN it is recorded and enqueued like any other
    assert response["statusCode"] == 200, response
    assert response_json(response)["status"] == "accepted"
    assert stack.messages() == [{"kind": "extract", "job_id": "big-1", "source": "webhook"}]


def test_receiver_refuses_one_byte_over_the_default_limit(stack: Stack, invoke: Invoke):
    # GIVEN a delivery one byte over the default limit (a misconfigured front let it through)
    body = padded_delivery("big-2", PLATFORM_MAX_BODY_BYTES + 1)
    # WHEN it arrives
    response = invoke(body)
    # THEN 413 and nothing written: the sender's delivery log shows it failed
    assert response["statusCode"] == 413
    assert stack.rows() == []
    assert stack.messages() == []
