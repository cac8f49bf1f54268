"""Webhook subscriptions: CRUD, the limit of 10, validation, rotation, account isolation."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import httpx
import pytest

OTHER_KEY = "sim-key-2"
HOOK = "https://hooks.example.com/geonode"


def _create(
    api: httpx.Client, url: str = HOOK, event_type: str = "extract_completed", **extra: Any
) -> Any:
    response = api.post("/v1/webhooks", json={"url": url, "event_type": event_type, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def test_webhooks_create_get_list_update_delete(api, clock):
    # WHEN a subscription is created
    created = _create(api, description="results pipeline")
    # THEN it is active, shows its secret once, and looks like the contract
    assert set(created) == {
        "id", "url", "description", "is_active", "event_type", "created_at", "updated_at", "secret",
    }  # fmt: skip
    assert created["is_active"] is True
    assert created["secret"].startswith("whsec_")
    assert len(base64.b64decode(created["secret"].removeprefix("whsec_"))) == 24
    hook_url = f"/v1/webhooks/{created['id']}"
    fetched = api.get(hook_url).json()
    assert "secret" not in fetched
    assert fetched == {k: v for k, v in created.items() if k != "secret"}
    assert [item["id"] for item in api.get("/v1/webhooks").json()["items"]] == [created["id"]]
    # AND PATCH and PUT change only what they are given
    clock.advance(5)
    patched = api.patch(hook_url, json={"is_active": False}).json()
    assert patched["is_active"] is False
    assert patched["url"] == HOOK
    assert patched["updated_at"] > created["updated_at"]
    put = api.put(hook_url, json={"url": "https://other.example.com/h", "description": None})
    assert put.json()["url"] == "https://other.example.com/h"
    assert put.json()["description"] is None
    assert put.json()["is_active"] is False
    # AND DELETE answers 204, after which the subscription is gone
    deleted = api.delete(hook_url)
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert api.get(hook_url).status_code == 404
    assert api.get("/v1/webhooks").json()["items"] == []


def test_webhooks_limit_is_10_per_account(server, make_client):
    api, other = make_client(server), make_client(server, OTHER_KEY)
    created = [_create(api, url=f"{HOOK}/{index}") for index in range(10)]
    over = api.post("/v1/webhooks", json={"url": HOOK, "event_type": "batch_completed"})
    assert over.status_code == 409
    assert over.json()["code"] == "WEBHOOK_LIMIT_REACHED"
    # Another account has its own ten; deleting one frees a slot.
    assert (
        other.post(
            "/v1/webhooks", json={"url": HOOK, "event_type": "extract_completed"}
        ).status_code
        == 201
    )
    api.delete(f"/v1/webhooks/{created[0]['id']}")
    assert (
        api.post("/v1/webhooks", json={"url": HOOK, "event_type": "crawl_completed"}).status_code
        == 201
    )


@pytest.mark.parametrize(
    "body",
    [
        {"url": HOOK, "event_type": "job_done"},
        {"url": HOOK},
        {"event_type": "extract_completed"},
        {"url": "not-a-uri", "event_type": "extract_completed"},
    ],
)
def test_webhooks_invalid_create_answers_422(api, body):
    response = api.post("/v1/webhooks", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"]


def test_webhooks_update_refuses_unknown_fields(api):
    hook = _create(api)
    response = api.patch(f"/v1/webhooks/{hook['id']}", json={"secret": "whsec_mine"})
    assert response.status_code == 422


def test_webhooks_are_invisible_to_another_account(server, make_client):
    hook = _create(make_client(server))
    other = make_client(server, OTHER_KEY)
    assert other.get(f"/v1/webhooks/{hook['id']}").status_code == 404
    assert other.delete(f"/v1/webhooks/{hook['id']}").status_code == 404
    assert other.get("/v1/webhooks").json()["items"] == []


def test_webhooks_rotate_secret_signs_with_new_secret_only(
    make_server, make_client, receiver, settle
):
    # GIVEN a subscription whose secret is rotated before its job settles
    server = make_server(job_duration_min_s=2, job_duration_max_s=2)
    api = make_client(server)
    hook = _create(api, url=receiver.url)
    rotated = api.post(f"/v1/webhooks/{hook['id']}/rotate-secret")
    new_secret = rotated.json()["secret"]
    api.post("/v1/extract", json={"url": "https://r.com/", "processing_mode": "async"})
    # WHEN the delivery goes out
    settle(server, 3)
    # THEN its signature matches the new secret and not the old one
    assert rotated.status_code == 200
    assert set(rotated.json()) == {"secret"}
    assert new_secret.startswith("whsec_") and new_secret != hook["secret"]
    (delivery,) = receiver.requests
    signature = delivery.headers["x-webhook-signature"]

    def expected(secret: str) -> str:
        return hmac.new(secret.encode(), delivery.body, hashlib.sha256).hexdigest()

    assert hmac.compare_digest(signature, expected(new_secret))
    assert not hmac.compare_digest(signature, expected(hook["secret"]))


def test_webhooks_rotate_unknown_id_answers_404(api):
    assert api.post("/v1/webhooks/nope/rotate-secret").status_code == 404
