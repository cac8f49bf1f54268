"""The sample events in ``events/``: built here, so tests and ``sam local invoke`` share them.

Regenerate with ``.venv/bin/python -m tests.support.sample_events``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scrape_pipeline.signatures import SignatureConfig, sign
from tests.support.events import api_gateway_event

EVENTS_DIR = Path(__file__).resolve().parents[2] / "events"
# Documented in events/README.md; valid nowhere but in local tests.
TEST_SECRET = "whsec_dGVzdC1zZWNyZXQtZm9yLXVuaXQtdGVzdHMtb25seQ"
_SIGNED_AT = 1_780_000_000.0


def _delivery(job_id: str, delivery_id: str) -> bytes:
    envelope = {
        "event": "extract_completed",
        "webhook_id": "wh_sample",
        "delivery_id": delivery_id,
        "timestamp": "2026-05-27T08:16:09Z",
        "data": {"job_id": job_id, "status": "completed"},
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


def _headers(delivery_id: str, body: bytes, secret: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "scraper-api-webhook/1.0",
        "X-Webhook-Event": "extract_completed",
        "X-Webhook-Delivery-Id": delivery_id,
        **sign(SignatureConfig(), body, secret, _SIGNED_AT),
    }


def sample_events() -> dict[str, dict[str, Any]]:
    """File name -> API Gateway proxy event."""
    job = "8f14e45f-ceea-467f-a8f5-bd2f1f2a0c11"
    valid = _delivery(job, "dlv_0001")
    duplicate = _delivery(job, "dlv_0002")  # the sender's retry: same job, new delivery id
    return {
        "webhook-valid.json": api_gateway_event(valid, _headers("dlv_0001", valid, TEST_SECRET)),
        "webhook-duplicate.json": api_gateway_event(
            duplicate, _headers("dlv_0002", duplicate, TEST_SECRET)
        ),
        "webhook-forged.json": api_gateway_event(
            valid, _headers("dlv_0003", valid, "whsec_not-the-secret")
        ),
    }


def render(event: dict[str, Any]) -> str:
    """The file text of an event (stable, so the committed files can be compared)."""
    stable = json.loads(json.dumps(event))
    stable["requestContext"]["requestId"] = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
    return json.dumps(stable, indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Write the events."""
    for name, event in sample_events().items():
        (EVENTS_DIR / name).write_text(render(event))


if __name__ == "__main__":
    main()
