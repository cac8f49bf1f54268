"""The committed sample events are current and mean what their names say."""

from __future__ import annotations

import json

from tests.receiver.conftest import Stack, bundle
from tests.support.events import response_json
from tests.support.sample_events import EVENTS_DIR, TEST_SECRET, render, sample_events


def test_sample_events_files_match_generator():
    for name, event in sample_events().items():
        assert (EVENTS_DIR / name).read_text() == render(event), f"regenerate events/{name}"


def test_sample_events_answer_as_named(stack: Stack, monkeypatch):
    from functions.receiver import app
    from tests.receiver.conftest import SECRET_NAME, FakeContext

    stack.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=bundle((TEST_SECRET, None)))
    # the events were signed once, for good: the geonode scheme signs no timestamp
    answers = {}
    for name in ("webhook-valid.json", "webhook-duplicate.json", "webhook-forged.json"):
        event = json.loads((EVENTS_DIR / name).read_text())
        response = app.lambda_handler(event, FakeContext())
        answers[name] = (response["statusCode"], response_json(response))
    assert answers["webhook-valid.json"][0] == 200
    assert answers["webhook-valid.json"][1]["status"] == "accepted"
    assert answers["webhook-duplicate.json"][1]["status"] == "duplicate"
    assert answers["webhook-forged.json"][0] == 401
    assert len(stack.messages()) == 1
