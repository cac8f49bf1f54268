"""The receiver wired to AWS from the environment."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.clock import Clock, active_clock
from scrape_pipeline.receiver import Receiver, ReceiverSettings
from scrape_pipeline.secret_store import SecretStore
from scrape_pipeline.wiring import stores


def build_receiver(env: Mapping[str, str] | None = None, *, clock: Clock | None = None) -> Receiver:
    """The receiver on real clients (boto3 honours ``AWS_ENDPOINT_URL``)."""
    settings = ReceiverSettings.from_env(env)
    clock = clock or active_clock()
    return Receiver(
        settings,
        ledger=stores.ledger(
            settings.table_name,
            ttl_days=settings.ttl_days,
            max_reopens=settings.max_reopens,
            clock=clock,
        ),
        queue=stores.queue(settings.queue_url),
        secrets=SecretStore(
            settings.secret_id,
            max_age=settings.secret_cache_seconds,
            min_refresh_interval=settings.secret_refresh_min_seconds,
            clock=clock,
        ),
        clock=clock,
    )
