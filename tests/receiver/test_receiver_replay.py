"""Replayed deliveries: old captures refused, fresh ones never make work twice, and the job kind
read from signed bytes only. Judged by the ledger table's items and the queue's messages (moto).
"""

from __future__ import annotations

import json
import time

import pytest

from scrape_pipeline.jobs import REASON_UNKNOWN_JOB, JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.leases import new_owner_id
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from tests.receiver.conftest import TABLE, Invoke, Stack, delivery_body
from tests.support.events import response_json

# The documented defaults: a 36-hour window, 300 s of sender clock ahead, three reopens.
WINDOW = 36 * 3600
AHEAD = 300
MAX_REOPENS = 3
# The simulator's schedule (0 s, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), every delay at its
# +20 % jitter, plus eight 15 s timeouts: the last retry of an event stamped when it happened.
LATEST_RETRY = int(sum((0, 5, 300, 1800, 7200, 18000, 36000, 36000)) * 1.2 + 8 * 15)


def nothing_written(stack: Stack) -> bool:
    return stack.rows() == [] and stack.messages() == []


def test_receiver_refuses_a_capture_older_than_the_window_without_side_effect(
    stack: Stack, invoke: Invoke
):
    # GIVEN a delivery signed with the valid secret, captured 36 hours and a minute ago
    body = delivery_body("old-1", sent_at=time.time() - WINDOW - 60)
    # WHEN it is replayed THEN it is refused, and nothing is recorded or sent
    response = invoke(body)
    assert response["statusCode"] == 401
    assert response_json(response) == {"error": "invalid signature"}
    assert nothing_written(stack)


def test_receiver_accepts_the_senders_latest_retry(stack: Stack, invoke: Invoke):
    # GIVEN the sender's eighth attempt of an event stamped when it happened (the contract does
    # not say whether the envelope's time is the event's or the attempt's: the worse is assumed)
    body = delivery_body("late-1", sent_at=time.time() - LATEST_RETRY)
    # WHEN it arrives THEN it is a delivery like any other
    response = invoke(body)
    assert response["statusCode"] == 200, response_json(response)
    assert stack.messages() == [{"kind": "extract", "job_id": "late-1", "source": "webhook"}]


def test_receiver_refuses_a_timestamp_far_in_the_future(stack: Stack, invoke: Invoke):
    # GIVEN one delivery stamped by a clock a minute ahead, another ten minutes ahead
    near = invoke(delivery_body("ahead-1", sent_at=time.time() + 60))
    far = invoke(delivery_body("ahead-2", sent_at=time.time() + 2 * AHEAD))
    # THEN the skew is tolerated, the far future is not (it would stay replayable for longer)
    assert near["statusCode"] == 200
    assert far["statusCode"] == 401
    assert [m["job_id"] for m in stack.messages()] == ["ahead-1"]


@pytest.mark.parametrize(
    ("timestamp", "error"),
    [
        (None, "missing timestamp"),
        ("yesterday", "malformed timestamp"),
        ("2026-05-27T08:16:09", "malformed timestamp"),  # no time zone
        (True, "malformed timestamp"),
    ],
    ids=["absent", "not-a-time", "naive", "boolean"],
)
def test_receiver_refuses_a_body_without_a_usable_timestamp(
    stack: Stack, invoke: Invoke, timestamp: object, error: str
):
    # GIVEN a verified body whose freshness cannot be told
    envelope = json.loads(delivery_body("nots-1"))
    if timestamp is None:
        del envelope["timestamp"]
    else:
        envelope["timestamp"] = timestamp
    # WHEN it is delivered THEN it is a bad request, with no side effect
    response = invoke(json.dumps(envelope).encode())
    assert response["statusCode"] == 400
    assert response_json(response) == {"error": error}
    assert nothing_written(stack)


def test_receiver_accepts_epoch_seconds_as_the_timestamp(stack: Stack, invoke: Invoke):
    envelope = json.loads(delivery_body("epoch-1"))
    envelope["timestamp"] = int(time.time())
    assert invoke(json.dumps(envelope).encode())["statusCode"] == 200


def test_receiver_window_can_be_turned_off_explicitly(stack: Stack, invoke: Invoke, monkeypatch):
    # GIVEN a sender that stamps no time, and an operator who turned the window off by name
    monkeypatch.setenv("WEBHOOK_MAX_AGE_SECONDS", "off")
    body = json.dumps({"event": "extract_completed", "data": {"job_id": "free-1"}}).encode()
    assert invoke(body)["statusCode"] == 200
    assert invoke(delivery_body("old-2", sent_at=time.time() - 10 * WINDOW))["statusCode"] == 200


@pytest.mark.parametrize("value", ["0", "-5", "never", "1.5"])
def test_receiver_window_is_not_switched_off_by_a_falsy_value(
    stack: Stack, invoke: Invoke, monkeypatch, value: str
):
    monkeypatch.setenv("WEBHOOK_MAX_AGE_SECONDS", value)
    response = invoke(delivery_body("cfg-1"))
    assert response["statusCode"] == 503  # the receiver cannot be built: ours to fix
    assert nothing_written(stack)


@pytest.mark.parametrize("scheme", ["standard_webhooks", "stripe"])
def test_receiver_signed_timestamp_schemes_keep_their_own_check(
    stack: Stack, invoke: Invoke, monkeypatch, scheme: str
):
    # GIVEN a scheme that signs its own timestamp, and an envelope stamped long ago
    monkeypatch.setenv("SIGNATURE_SCHEME", scheme)
    config = SignatureConfig(scheme=scheme)  # type: ignore[arg-type]
    body = delivery_body("sw-old", sent_at=time.time() - 10 * WINDOW)
    # THEN the signed header decides, not the envelope: signed now it passes, an hour ago not
    assert invoke(body, config=config)["statusCode"] == 200
    assert invoke(body, config=config, now=time.time() - 3600)["statusCode"] == 401


# -- a job closed as "unknown job", and deliveries for it ------------------------------------


def close_as_unknown(ledger: Ledger, key: JobKey) -> None:
    """What the processor does to a job the API keeps answering 404 for."""
    owner = new_owner_id()
    assert ledger.acquire(key, owner, 60.0, source="test").granted
    ledger.finish(key, owner, Outcome.DEAD_LETTERED, {"reason": REASON_UNKNOWN_JOB})


@pytest.fixture
def closed(stack: Stack) -> tuple[Ledger, JobKey]:
    ledger = Ledger(TABLE, client=stack.dynamodb)
    key = JobKey(JobKind.EXTRACT, "gone-1")
    close_as_unknown(ledger, key)
    return ledger, key


def test_receiver_same_delivery_replayed_reopens_a_closed_job_once(
    stack: Stack, invoke: Invoke, closed: tuple[Ledger, JobKey]
):
    ledger, key = closed
    body = delivery_body("gone-1", delivery_id="dlv_seen")
    # GIVEN a delivery that reopened the job, which was then closed again as unknown
    assert response_json(invoke(body))["status"] == "accepted"
    close_as_unknown(ledger, key)
    # WHEN the very same delivery is replayed, again and again
    answers = [response_json(invoke(body))["status"] for _ in range(5)]
    # THEN it is evidence already seen: nothing is reopened, one message in all
    assert answers == ["duplicate"] * 5
    assert len(stack.messages()) == 1


def test_receiver_reopens_a_job_a_bounded_number_of_times(
    stack: Stack, invoke: Invoke, closed: tuple[Ledger, JobKey]
):
    ledger, key = closed
    # GIVEN deliveries each with a delivery id of its own, each after the job closed again
    sent = []
    for n in range(2 * MAX_REOPENS):
        invoke(delivery_body("gone-1", delivery_id=f"d{n}"))
        sent.append(len(stack.messages()))  # each read takes the messages it returns
        if sent[-1]:  # reopened: the processor closes it again
            close_as_unknown(ledger, key)
    # THEN the job came back MAX_REOPENS times, with one message each, and never again
    assert sent == [1] * MAX_REOPENS + [0] * MAX_REOPENS, sent


def test_receiver_event_header_cannot_choose_the_event(stack: Stack, invoke: Invoke):
    # GIVEN a signed body that names no event, and an unsigned header that does
    envelope = json.loads(delivery_body("rekey-1"))
    del envelope["event"]
    body = json.dumps(envelope).encode()
    # WHEN it is delivered THEN the header is not read: 400, nothing recorded
    response = invoke(body, headers={"X-Webhook-Event": "crawl_completed"})
    assert response["statusCode"] == 400
    assert response_json(response) == {"error": "missing event type"}
    assert nothing_written(stack)


def test_receiver_event_header_cannot_rekey_a_signed_event(stack: Stack, invoke: Invoke):
    # GIVEN a captured extract delivery, replayed with the header saying "crawl"
    body = delivery_body("rekey-2", "extract_completed")
    response = invoke(body, headers={"X-Webhook-Event": "crawl_completed"})
    # THEN the signed event decides the kind
    assert response["statusCode"] == 200
    assert stack.messages() == [{"kind": "extract", "job_id": "rekey-2", "source": "webhook"}]
