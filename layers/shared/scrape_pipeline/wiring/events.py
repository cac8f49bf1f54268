"""The outcome events' emitter on a real EventBridge client, when the stack has a bus."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.config.resources import EVENT_BUS_NAME
from scrape_pipeline.events.outbox import Emitter, EventBus
from scrape_pipeline.ledger.work import WorkLedger


def emitter_from_env(
    env: Mapping[str, str], ledger: WorkLedger, *, linger: float = 0.0
) -> Emitter | None:
    """The emitter for the bus ``EVENT_BUS_NAME`` names (None: none), lingering ``linger`` s."""
    name = EVENT_BUS_NAME.read(env)
    if not name:
        return None
    import boto3  # noqa: PLC0415 - keeps the layer importable without AWS configured

    return Emitter(EventBus(name, client=boto3.client("events")), ledger, linger=linger)
