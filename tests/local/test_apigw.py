"""Local ``apigw``: API Gateway's and Lambda's payload quotas, and the receiver's timeout."""

from __future__ import annotations

import base64
import http.client
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scrape_pipeline_local.apigw import ApiGatewayFront
from scrape_pipeline_local.events import api_gateway_event
from scrape_pipeline_local.limits import (
    API_GATEWAY_MAX_PAYLOAD_BYTES,
    LAMBDA_SYNC_MAX_PAYLOAD_BYTES,
    event_bytes,
)

PATH = "/webhooks/geonode"
CONTENT_TYPE = "application/octet-stream"
TINY_TIMEOUT = 0.2
POLL = 0.005
BASE64_QUANTUM = 3  # base64 turns each 3 bytes into 4


class Receiver:
    """A handler that keeps the bodies it got (decoded) and answers 200."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.event_sizes: list[int] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.bodies.append(base64.b64decode(event["body"]))
        self.event_sizes.append(event_bytes(event))
        return {"statusCode": 200, "body": "{}"}


@pytest.fixture
def receiver() -> Receiver:
    return Receiver()


@pytest.fixture
def front(receiver: Receiver) -> Iterator[ApiGatewayFront]:
    front = ApiGatewayFront(receiver).start()
    yield front
    front.stop()


def post(front: ApiGatewayFront, body: bytes) -> int:
    """POST ``body``; the answer's status."""
    host, port = front.base_url.split("//", 1)[1].split("/", 1)[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(
            "POST", f"/{front.stage}{PATH}", body=body, headers={"Content-Type": CONTENT_TYPE}
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def largest_body_that_fits(front: ApiGatewayFront) -> int:
    """The longest body whose proxy event is at most Lambda's 6 MB, for the headers ``post``
    sends (http.client adds Host, Accept-Encoding and Content-Length)."""
    authority = front.base_url.split("//", 1)[1].split("/", 1)[0]
    approximate = BASE64_QUANTUM * (LAMBDA_SYNC_MAX_PAYLOAD_BYTES // 4)
    headers = {
        "Host": authority,
        "Accept-Encoding": "identity",
        "Content-Type": CONTENT_TYPE,
        "Content-Length": str(approximate),  # the same number of digits as the answer's
    }
    overhead = event_bytes(api_gateway_event(b"", headers, path=PATH, stage=front.stage))
    return BASE64_QUANTUM * ((LAMBDA_SYNC_MAX_PAYLOAD_BYTES - overhead) // 4)


def test_a_body_over_api_gateways_10_mb_gets_413_without_an_invocation(front, receiver):
    assert post(front, b"x" * (API_GATEWAY_MAX_PAYLOAD_BYTES + 1)) == 413
    assert receiver.bodies == [] and front.invocations == 0 and front.too_large == 1


def test_a_body_whose_event_is_over_lambdas_6_mb_gets_413_without_an_invocation(front, receiver):
    # 5 MB fits API Gateway, but base64 makes the event about 6.7 MB.
    assert post(front, b"x" * (5 * 1024 * 1024)) == 413
    assert receiver.bodies == [] and front.invocations == 0 and front.too_large == 1


def test_a_body_just_under_the_lambda_limit_reaches_the_handler_exact(front, receiver):
    size = largest_body_that_fits(front)
    body = os.urandom(size)

    assert post(front, body) == 200
    assert receiver.bodies == [body]
    assert (
        LAMBDA_SYNC_MAX_PAYLOAD_BYTES - 4 < receiver.event_sizes[0] <= LAMBDA_SYNC_MAX_PAYLOAD_BYTES
    )
    # One base64 quantum more and it no longer fits.
    assert post(front, os.urandom(size + BASE64_QUANTUM)) == 413
    assert front.invocations == 1


def test_a_receiver_past_its_timeout_answers_502_and_the_next_request_is_served():
    release = threading.Event()
    effects: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event["body"] == base64.b64encode(b"slow").decode():
            while not release.wait(POLL):
                pass
            effects.append("past the deadline")
        return {"statusCode": 200, "body": "{}"}

    front = ApiGatewayFront(handler, timeout_seconds=TINY_TIMEOUT).start()
    try:
        assert post(front, b"slow") == 502
        release.set()
        assert post(front, b"fast") == 200
    finally:
        front.stop()

    assert front.timeouts == 1 and effects == []
