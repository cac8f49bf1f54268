"""The receiver handler fed real API Gateway proxy events, against moto in-process."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import botocore.handlers
import pytest

import scrape_pipeline.ledger.intake as intake_module
from scrape_pipeline import clock as clocks
from scrape_pipeline.ledger.evidence import webhook_decision
from scrape_pipeline.receiver.signatures.config import Scheme, SignatureConfig
from scrape_pipeline_local.clock import ManualClock
from tests.receiver.conftest import (
    SECRET,
    SECRET_NAME,
    Invoke,
    Stack,
    bundle,
    delivery_body,
    stamp,
)
from tests.support.events import api_gateway_event, response_json


def test_receiver_accepts_new_delivery_records_and_enqueues(stack: Stack, invoke: Invoke):
    response = invoke(delivery_body("job-1"))

    assert response["statusCode"] == 200
    assert response_json(response) == {"status": "accepted", "kind": "extract", "job_id": "job-1"}
    [row] = stack.rows()
    assert row["pk"]["S"] == "extract#job-1"
    assert row["state"]["S"] == "RECEIVED" and row["pending_state"]["S"] == "RECEIVED"
    assert float(row["expires_at"]["N"]) > time.time() + 89 * 86_400
    assert stack.messages() == [{"kind": "extract", "job_id": "job-1", "source": "webhook"}]


def test_receiver_duplicate_answers_2xx_and_enqueues_nothing_more(stack: Stack, invoke: Invoke):
    invoke(delivery_body("job-1"))
    # a retry of the same job comes with another delivery id: dedup is on the job
    again = invoke(delivery_body("job-1"), headers={"X-Webhook-Delivery-Id": "dlv_2"})

    assert again["statusCode"] == 200
    assert response_json(again)["status"] == "duplicate"
    assert len(stack.rows()) == 1
    assert len(stack.messages()) == 1


def test_receiver_asks_its_rule_only_about_a_row_it_found(
    stack: Stack, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN the real webhook rule, with its calls counted
    asked: list[object] = []

    def counted(row: object, *rest: object) -> object:
        asked.append(row)
        return webhook_decision(row, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(intake_module, "webhook_decision", counted)
    # WHEN a new job's delivery and a duplicate arrive
    invoke(delivery_body("job-1"))
    invoke(delivery_body("job-1"), headers={"X-Webhook-Delivery-Id": "dlv_2"})
    # THEN the conditional put decided the new row; the rule was asked once, about the row found
    assert [row is not None for row in asked] == [True]
    assert len(stack.messages()) == 1


def test_receiver_batch_and_crawl_events_have_their_own_kind(stack: Stack, invoke: Invoke):
    invoke(delivery_body("same-id", "batch_completed"))
    invoke(delivery_body("same-id", "crawl_completed"))
    kinds = sorted(m["kind"] for m in stack.messages())
    assert kinds == ["batch", "crawl"]


@pytest.mark.parametrize(
    ("secret", "headers"),
    [
        ("whsec_someone-else", {}),  # forged: signed with another secret
        (None, {}),  # no signature header at all
        (None, {"X-Webhook-Signature": "zz-not-hex"}),  # malformed signature
        (None, {"X-Webhook-Signature": ""}),
    ],
    ids=["wrong-secret", "missing", "malformed", "empty"],
)
def test_receiver_rejects_bad_signature_without_side_effect(
    stack: Stack, invoke: Invoke, secret, headers, capsys, log_output
):
    response = invoke(delivery_body(), secret=secret, headers=headers)

    assert response["statusCode"] == 401
    assert response_json(response) == {"error": "invalid signature"}
    assert stack.rows() == [] and stack.messages() == []
    assert "SignatureRejected" in capsys.readouterr().out  # the metric the alarm watches
    logged = log_output.getvalue()
    assert '"outcome":"signature_rejected"' in logged and '"reason":' in logged
    assert SECRET not in logged and "job-1" not in logged  # nothing logged but the reason


def test_receiver_rejects_tampered_body(stack: Stack, invoke: Invoke):
    body = delivery_body("job-1")
    from scrape_pipeline_ops.signing import sign

    headers = sign(SignatureConfig(), body, SECRET, time.time())
    response = invoke(delivery_body("job-2"), secret=None, headers=headers)
    assert response["statusCode"] == 401
    assert stack.rows() == []


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{not json", "body is not JSON"),
        (b"\xff\xfe\x00garbage", "body is not JSON"),  # not even UTF-8
        (b"[1, 2]", "body must be a JSON object"),
        (b'{"event": "extract_completed", "data": {}}', "missing job id"),
        (b'{"event": "extract_completed", "data": {"job_id": 42}}', "malformed job id"),
        (b'{"event": "extract_completed", "data": {"job_id": "../../etc"}}', "malformed job id"),
        (b'{"event": "extract_completed", "data": {"job_id": ""}}', "malformed job id"),
        (b'{"event": "something_else", "data": {"job_id": "j"}}', "unknown event type"),
        (b'{"data": {"job_id": "j"}}', "missing event type"),
        (b"[" * 100_000, "body is not JSON"),  # nesting that would blow the stack
    ],
    ids=[
        "invalid-json",
        "not-utf8",
        "array",
        "no-job-id",
        "job-id-number",
        "job-id-path",
        "job-id-empty",
        "unknown-event",
        "no-event",
        "deep-nesting",
    ],
)
def test_receiver_bad_payload_is_400_without_side_effect(stack: Stack, invoke: Invoke, body, error):
    response = invoke(body)
    assert response["statusCode"] == 400
    assert response_json(response) == {"error": error}
    assert stack.rows() == [] and stack.messages() == []


def test_receiver_reads_seed_article_flat_fields(stack: Stack, invoke: Invoke):
    flat = {"job_id": "flat-1", "event_type": "extract_completed", "id": "d", "timestamp": stamp()}
    response = invoke(json.dumps(flat).encode())
    assert response["statusCode"] == 200
    assert stack.messages()[0]["job_id"] == "flat-1"
    assert stack.rows()[0]["seen_deliveries"] == {"SS": ["d"]}  # "id" is the attempt's


def test_receiver_field_locations_are_configurable(stack: Stack, invoke: Invoke, monkeypatch):
    monkeypatch.setenv("JOB_ID_FIELDS", "payload.id")
    monkeypatch.setenv("EVENT_FIELDS", "type")
    monkeypatch.setenv("DELIVERY_ID_FIELDS", "meta.attempt")
    monkeypatch.setenv("TIMESTAMP_FIELDS", "meta.sent")
    meta = {"attempt": "a-1", "sent": int(time.time())}
    body = json.dumps({"type": "batch_completed", "payload": {"id": "b-1"}, "meta": meta})
    assert invoke(body.encode())["statusCode"] == 200
    assert stack.messages() == [{"kind": "batch", "job_id": "b-1", "source": "webhook"}]
    assert stack.rows()[0]["seen_deliveries"] == {"SS": ["a-1"]}


def test_receiver_body_over_limit_is_413(stack: Stack, invoke: Invoke, monkeypatch):
    monkeypatch.setenv("MAX_BODY_BYTES", "1000")
    body = json.dumps({"event": "extract_completed", "data": {"job_id": "j", "pad": "x" * 2000}})
    response = invoke(body.encode())
    assert response["statusCode"] == 413
    assert stack.rows() == []


def test_receiver_invalid_base64_is_400(stack: Stack):
    from functions.receiver import app
    from tests.receiver.conftest import FakeContext

    event = api_gateway_event(b"{}", {"X-Webhook-Signature": "00"})
    event["body"] = "!!!not base64!!!"
    response = app.lambda_handler(event, FakeContext())
    assert response["statusCode"] == 400
    assert stack.rows() == []


def test_receiver_plain_text_body_when_not_base64(stack: Stack, invoke: Invoke):
    # An API without binary media types passes text bodies as they are.
    assert invoke(delivery_body("t-1"), base64_encoded=False)["statusCode"] == 200
    assert stack.messages()[0]["job_id"] == "t-1"


def test_receiver_standard_webhooks_scheme(stack: Stack, invoke: Invoke, monkeypatch):
    monkeypatch.setenv("SIGNATURE_SCHEME", "standard_webhooks")
    config = SignatureConfig(scheme=Scheme.STANDARD_WEBHOOKS)
    ok = invoke(delivery_body("sw-1"), config=config)
    assert ok["statusCode"] == 200
    # a geonode-style signature means nothing to this scheme
    assert invoke(delivery_body("sw-2"))["statusCode"] == 401


def test_receiver_stale_timestamp_rejected(stack: Stack, invoke: Invoke, monkeypatch):
    monkeypatch.setenv("SIGNATURE_SCHEME", "stripe")
    config = SignatureConfig(scheme=Scheme.STRIPE)
    response = invoke(delivery_body(), config=config, now=time.time() - 3600)
    assert response["statusCode"] == 401
    assert stack.rows() == []


def test_receiver_previous_secret_valid_within_grace(stack: Stack, invoke: Invoke):
    # GIVEN a rotation: the new secret current, the previous one valid for another hour
    new = "whsec_bmV3LXNlY3JldC1hZnRlci1yb3RhdGlvbg"
    grace = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    stack.secrets.put_secret_value(
        SecretId=SECRET_NAME, SecretString=bundle((new, None), (SECRET, grace))
    )
    # THEN deliveries signed with either verify
    assert invoke(delivery_body("old"), secret=SECRET)["statusCode"] == 200
    assert invoke(delivery_body("new"), secret=new)["statusCode"] == 200


def test_receiver_previous_secret_rejected_after_grace(stack: Stack, invoke: Invoke):
    new = "whsec_bmV3LXNlY3JldC1hZnRlci1yb3RhdGlvbg"
    expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    stack.secrets.put_secret_value(
        SecretId=SECRET_NAME, SecretString=bundle((new, None), (SECRET, expired))
    )
    assert invoke(delivery_body("old"), secret=SECRET)["statusCode"] == 401
    assert invoke(delivery_body("new"), secret=new)["statusCode"] == 200


def test_receiver_verifies_each_subscriptions_own_secret_whoever_was_rotated(
    stack: Stack, invoke: Invoke
):
    # GIVEN a per-subscription bundle: extract's previous secret past its grace, batch's and
    # crawl's secrets never rotated
    new = "whsec_bmV3LXNlY3JldC1hZnRlci1yb3RhdGlvbg"
    batch, crawl = "whsec_YmF0Y2gtc2VjcmV0LTEyMw", "whsec_Y3Jhd2wtc2VjcmV0LTQ1Ng"
    expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    by_id = {
        "wh_extract": [
            {"value": new, "expires_at": None},
            {"value": SECRET, "expires_at": expired},
        ],
        "wh_batch": [{"value": batch, "expires_at": None}],
        "wh_crawl": [{"value": crawl, "expires_at": None}],
    }
    stack.secrets.put_secret_value(
        SecretId=SECRET_NAME, SecretString=json.dumps({"subscriptions": by_id})
    )
    # THEN every subscription's current secret verifies its deliveries; the retired one not
    assert invoke(delivery_body("e1"), secret=new)["statusCode"] == 200
    assert invoke(delivery_body("b1", "batch_completed"), secret=batch)["statusCode"] == 200
    assert invoke(delivery_body("c1", "crawl_completed"), secret=crawl)["statusCode"] == 200
    assert invoke(delivery_body("e2"), secret=SECRET)["statusCode"] == 401
    assert len(stack.rows()) == 3


@pytest.fixture
def manual_clock() -> Iterator[ManualClock]:
    """The handler's clock, moved by the test (wall time starts now: signatures stay current)."""
    clock = ManualClock(time.time())
    clocks.use_clock(clock)
    yield clock
    clocks.use_clock(None)


def count_secret_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every GetSecretValue sent from now on, by any client (Powertools builds its own).

    botocore copies its built-in handlers into each new session, so a client made at cold
    start is counted too; moto hooks in the same way.
    """
    reads: list[str] = []
    hook = ("before-call.secrets-manager.GetSecretValue", lambda **_: reads.append("read"))
    monkeypatch.setattr(
        botocore.handlers, "BUILTIN_HANDLERS", [*botocore.handlers.BUILTIN_HANDLERS, hook]
    )
    return reads


def test_receiver_cold_start_reads_the_secret_once_when_the_first_delivery_fails(
    stack: Stack, invoke: Invoke, monkeypatch, manual_clock: ManualClock
):
    # GIVEN a cold container whose first delivery does not verify (forged, or signed with a
    # secret rotated at the API and not stored yet)
    reads = count_secret_reads(monkeypatch)
    first = invoke(delivery_body("first"), secret="whsec_x", now=manual_clock.time())
    # THEN one read: the bundle it just read is the newest there is, and a forced refresh
    # right after would only read the same bytes again
    assert first["statusCode"] == 401
    assert reads == ["read"]
    # and the next failures get the one refresh a rotation needs, then none in the interval
    for i in range(20):
        forged = invoke(delivery_body(f"f{i}"), secret="whsec_x", now=manual_clock.time())
        assert forged["statusCode"] == 401
    assert reads == ["read", "read"]
    assert stack.rows() == []


def test_receiver_reads_a_rotated_bundle_when_its_cache_expires(
    stack: Stack, invoke: Invoke, manual_clock: ManualClock
):
    # GIVEN a warm receiver, then the bundle rotated in Secrets Manager
    assert invoke(delivery_body("before"), now=manual_clock.time())["statusCode"] == 200
    new = "whsec_cm90YXRlZC1zZWNyZXQtdmFsdWUtMTIz"
    stack.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=bundle((new, None)))
    # WHEN its cache has expired on the receiver's clock (not on Powertools', the system's)
    manual_clock.advance(61)
    # THEN the read it makes is of the new bundle, so a delivery signed with the new secret
    # verifies (a read from Powertools' cache would be the old one, and no refresh follows)
    after = invoke(delivery_body("after"), secret=new, now=manual_clock.time())
    assert after["statusCode"] == 200


def test_receiver_picks_up_rotated_secret_without_restart(stack: Stack, invoke: Invoke):
    # GIVEN a warm receiver that cached the old secret
    assert invoke(delivery_body("before"))["statusCode"] == 200
    new = "whsec_cm90YXRlZC1zZWNyZXQtdmFsdWUtMTIz"
    stack.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=bundle((new, None)))
    # WHEN a delivery signed with the new secret arrives THEN one forced refresh accepts it
    assert invoke(delivery_body("after"), secret=new)["statusCode"] == 200
    # and the old one no longer verifies
    assert invoke(delivery_body("late"), secret=SECRET)["statusCode"] == 401


def test_receiver_sqs_failure_is_503_and_leaves_no_orphan(
    stack: Stack, invoke: Invoke, monkeypatch
):
    monkeypatch.setenv("QUEUE_URL", stack.queue_url + "-gone")
    response = invoke(delivery_body("job-1"))
    assert response["statusCode"] == 503
    assert stack.rows() == []  # the sender's retry records it afresh


def test_receiver_sqs_failure_then_retry_succeeds(stack: Stack, invoke: Invoke, monkeypatch):
    from functions.receiver import app

    monkeypatch.setenv("QUEUE_URL", stack.queue_url + "-gone")
    assert invoke(delivery_body("job-1"))["statusCode"] == 503
    monkeypatch.setenv("QUEUE_URL", stack.queue_url)
    app.reset_receiver()
    assert invoke(delivery_body("job-1"))["statusCode"] == 200
    assert len(stack.messages()) == 1


def test_receiver_dynamodb_failure_is_503(stack: Stack, invoke: Invoke, monkeypatch):
    monkeypatch.setenv("LEDGER_TABLE_NAME", "no-such-table")
    response = invoke(delivery_body("job-1"))
    assert response["statusCode"] == 503
    assert stack.messages() == []


def test_receiver_missing_configuration_is_503(stack: Stack, invoke: Invoke, monkeypatch):
    monkeypatch.delenv("QUEUE_URL")
    assert invoke(delivery_body())["statusCode"] == 503


def test_receiver_malformed_secret_bundle_is_503(stack: Stack, invoke: Invoke):
    stack.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString='{"secrets": "nope"}')
    response = invoke(delivery_body())
    assert response["statusCode"] == 503
    assert stack.rows() == []


def test_receiver_secrets_manager_failure_is_503(stack: Stack, invoke: Invoke):
    # GIVEN the secret cannot be read (deleted: Secrets Manager answers an error)
    stack.secrets.delete_secret(SecretId=SECRET_NAME, ForceDeleteWithoutRecovery=True)
    # WHEN a delivery arrives THEN the sender is told to retry, not handed a Lambda error
    response = invoke(delivery_body())
    assert response["statusCode"] == 503
    assert stack.rows() == []


def test_receiver_unknown_route_is_404(stack: Stack, invoke: Invoke):
    response = invoke(delivery_body(), method="GET")
    assert response["statusCode"] in (404, 405)
    assert stack.rows() == []


def test_receiver_logs_correlation_id_never_body_or_secret(
    stack: Stack, invoke: Invoke, log_output
):
    invoke(delivery_body("job-log"), headers={"X-Webhook-Delivery-Id": "dlv-corr-9"})
    out = log_output.getvalue()
    assert '"outcome":"accepted"' in out
    assert "dlv-corr-9" in out
    assert SECRET not in out
    assert "2026-05-27T08:16:09Z" not in out  # a field only the body holds
    assert base64.b64encode(delivery_body("job-log")).decode() not in out
