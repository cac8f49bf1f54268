"""The receiver wired to AWS from the environment (not through ``shared``, whose Geonode client
and emitter it never runs)."""

from __future__ import annotations

from collections.abc import Mapping

import boto3

from scrape_pipeline.clock import Clock
from scrape_pipeline.ledger.intake import Intake
from scrape_pipeline.processor.message import JobSender
from scrape_pipeline.receiver.secret_store import SecretStore
from scrape_pipeline.receiver.webhook import Receiver, ReceiverSettings


def build_receiver(env: Mapping[str, str], *, clock: Clock) -> Receiver:
    """The receiver on real clients (boto3 honours ``AWS_ENDPOINT_URL``)."""
    settings = ReceiverSettings.from_env(env)
    ledger = Intake(
        settings.table_name,
        client=boto3.client("dynamodb"),
        ttl_days=settings.ttl_days,
        max_reopens=settings.max_reopens,
        clock=clock,
    )
    secrets = SecretStore(
        settings.secret_id,
        max_age=settings.secret_cache_seconds,
        min_refresh_interval=settings.secret_refresh_min_seconds,
        clock=clock,
    )
    queue = JobSender(settings.queue_url, client=boto3.client("sqs"))
    return Receiver(settings, ledger=ledger, queue=queue, secrets=secrets, clock=clock)
