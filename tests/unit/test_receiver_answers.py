"""``answer_proxy``: the API Gateway body and the receiver's settings become statuses here."""

from __future__ import annotations

import base64

import pytest

from scrape_pipeline.config.settings import SettingsError
from scrape_pipeline.receiver.webhook import (
    MAX_CORRELATION_CHARS,
    Answer,
    Receiver,
    WebhookOutcome,
    answer_proxy,
    correlation_id,
    proxy_body,
)


class Recording:
    """A stand-in receiver that remembers the bytes it was handed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def handle(self, body: bytes, headers: object) -> Answer:
        self.bodies.append(body)
        return Answer(200, {"status": "accepted"}, WebhookOutcome.ACCEPTED)


def test_proxy_body_base64_gives_the_exact_bytes():
    raw = b"\xff\x00{}"
    assert proxy_body(base64.b64encode(raw).decode(), True) == raw
    assert proxy_body('{"a": 1}', False) == b'{"a": 1}'
    assert proxy_body(None, None) == b""


def test_answer_proxy_broken_base64_is_400_before_anything_is_built():
    # GIVEN a body flagged base64 that is not, and a receiver that must not be built
    def never() -> Receiver:
        raise AssertionError("built for a broken body")

    # WHEN answered THEN 400, naming the problem
    answer = answer_proxy("!!!not base64!!!", base64_encoded=True, headers={}, receiver=never)
    assert (answer.status, answer.outcome) == (400, "bad_request")
    assert answer.body == {"error": "body is not valid base64"}


def test_answer_proxy_bad_settings_is_503_naming_the_variable():
    def misconfigured() -> Receiver:
        raise SettingsError("missing settings: QUEUE_URL", names=("QUEUE_URL",))

    answer = answer_proxy("{}", base64_encoded=False, headers={}, receiver=misconfigured)
    assert (answer.status, answer.outcome) == (503, "unavailable")
    assert answer.reason == "configuration: missing settings: QUEUE_URL"
    assert answer.body == {"error": "temporarily unavailable"}  # the sender learns nothing more


@pytest.mark.parametrize("encoded", [True, False])
def test_answer_proxy_hands_the_receiver_the_decoded_bytes(encoded: bool):
    recording = Recording()
    body = base64.b64encode(b"payload").decode() if encoded else "payload"
    answer = answer_proxy(
        body,
        base64_encoded=encoded,
        headers={},
        receiver=lambda: recording,  # type: ignore[arg-type,return-value]
    )
    assert answer.status == 200
    assert recording.bodies == [b"payload"]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-Webhook-Delivery-Id": "d-1", "webhook-id": "msg_1"}, "d-1"),  # the first named wins
        ({"Webhook-Id": "msg_1"}, "msg_1"),  # any case
        ({"x-github-delivery": "g" * 300}, "g" * MAX_CORRELATION_CHARS),  # cut, never refused
        ({"webhook-id": "", "x-github-delivery": "g-2"}, "g-2"),  # an empty one names nothing
        ({"content-type": "application/json"}, None),
    ],
)
def test_correlation_id_is_the_first_delivery_header_present(headers, expected):
    assert correlation_id(headers) == expected


def test_every_webhook_outcome_counts_in_a_metric():
    # a new outcome without a metric would raise in the handler, after the answer was decided
    assert WebhookOutcome("too_large").metric == "WebhookBadRequest"
    assert all(outcome.metric for outcome in WebhookOutcome)
