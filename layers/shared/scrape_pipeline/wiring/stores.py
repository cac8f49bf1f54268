"""The ledger and the job queue on real AWS clients: what the other functions' wiring shares."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import QUEUE_URL, LedgerSettings
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobQueue


def ledger(table: str, *, ttl_days: int, max_reopens: int, clock: Clock) -> Ledger:
    """The ledger on a DynamoDB client."""
    import boto3  # noqa: PLC0415 - keeps the layer importable without AWS configured

    return Ledger(
        table,
        client=boto3.client("dynamodb"),
        ttl_days=ttl_days,
        max_reopens=max_reopens,
        clock=clock,
    )


def ledger_from_env(env: Mapping[str, str], clock: Clock) -> Ledger:
    """The ledger its declarations name (``resources.LedgerSettings``)."""
    settings = LedgerSettings.from_env(env)
    return ledger(
        settings.table_name,
        ttl_days=settings.ttl_days,
        max_reopens=settings.max_reopens,
        clock=clock,
    )


def queue(url: str) -> JobQueue:
    """The job queue on an SQS client."""
    import boto3  # noqa: PLC0415

    return JobQueue(url, client=boto3.client("sqs"))


def queue_from_env(env: Mapping[str, str]) -> JobQueue:
    """The job queue ``QUEUE_URL`` names."""
    return queue(QUEUE_URL.read(env))
