"""``answer_proxy``: the API Gateway body and the receiver's settings become statuses here."""

from __future__ import annotations

import base64

import pytest

from scrape_pipeline.receiver import Answer, Receiver, answer_proxy, proxy_body
from scrape_pipeline.settings import SettingsError


class Recording:
    """A stand-in receiver that remembers the bytes it was handed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def handle(self, body: bytes, headers: object) -> Answer:
        self.bodies.append(body)
        return Answer(200, {"status": "accepted"}, "accepted")


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
