"""The committed sample events are current and mean what their names say."""

from __future__ import annotations

import json

from scrape_pipeline.clock import use_clock
from scrape_pipeline_local.clock import ManualClock
from tests.receiver.conftest import Stack, bundle
from tests.support.events import response_json
from tests.support.sample_events import (
    EVENTS_DIR,
    STAMPED_AT,
    TEST_SECRET,
    render,
    sample_events,
)


def test_sample_events_files_match_generator():
    for name, event in sample_events().items():
        assert (EVENTS_DIR / name).read_text() == render(event), f"regenerate events/{name}"


def test_sample_events_answer_as_named(stack: Stack, monkeypatch):
    from functions.receiver import app
    from tests.receiver.conftest import SECRET_NAME, FakeContext

    stack.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=bundle((TEST_SECRET, None)))
    # the events were signed once, for good, and stamped at the local stack's clock start:
    # fresh on that clock, refused on today's
    answers = {}
    use_clock(ManualClock(float(STAMPED_AT) + 60))
    try:
        for name in ("webhook-valid.json", "webhook-duplicate.json", "webhook-forged.json"):
            event = json.loads((EVENTS_DIR / name).read_text())
            response = app.lambda_handler(event, FakeContext())
            answers[name] = (response["statusCode"], response_json(response))
    finally:
        use_clock(None)
    assert answers["webhook-valid.json"][0] == 200
    assert answers["webhook-valid.json"][1]["status"] == "accepted"
    assert answers["webhook-duplicate.json"][1]["status"] == "duplicate"
    assert answers["webhook-forged.json"][0] == 401
    assert len(stack.messages()) == 1


def test_sample_valid_event_is_refused_once_its_stamp_is_old(stack: Stack):
    # GIVEN the public sample delivery, and a stack whose secret is the sample's (never do this)
    from functions.receiver import app
    from tests.receiver.conftest import SECRET_NAME, FakeContext

    stack.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=bundle((TEST_SECRET, None)))
    event = json.loads((EVENTS_DIR / "webhook-valid.json").read_text())
    # WHEN it is sent two days after its stamp THEN it is a capture like any other: refused
    use_clock(ManualClock(float(STAMPED_AT) + 2 * 86_400))
    try:
        response = app.lambda_handler(event, FakeContext())
    finally:
        use_clock(None)
    assert response["statusCode"] == 401
    assert stack.messages() == []
