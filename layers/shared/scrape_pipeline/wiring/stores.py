"""The ledger and the job queue on real AWS clients: what the other functions' wiring shares."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import QUEUE_URL, LedgerSettings
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobQueue


def ledger_from_env(env: Mapping[str, str], clock: Clock) -> Ledger:
    """The ledger its declarations name (``resources.LedgerSettings``) on a DynamoDB client."""
    import boto3  # noqa: PLC0415 - keeps the layer importable without AWS configured

    settings = LedgerSettings.from_env(env)
    return Ledger(
        settings.table_name,
        client=boto3.client("dynamodb"),
        ttl_days=settings.ttl_days,
        max_reopens=settings.max_reopens,
        clock=clock,
    )


def queue_from_env(env: Mapping[str, str]) -> JobQueue:
    """The job queue ``QUEUE_URL`` names, on an SQS client."""
    import boto3  # noqa: PLC0415

    return JobQueue(QUEUE_URL.read(env), client=boto3.client("sqs"))
