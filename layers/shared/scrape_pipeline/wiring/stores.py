"""The ledger and the job queue on real AWS clients, in the role each function runs: what the
functions' wiring shares."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import QUEUE_URL, LedgerSettings
from scrape_pipeline.ledger.table import LedgerTable
from scrape_pipeline.processor.message import JobSender


def ledger_from_env[L: LedgerTable](env: Mapping[str, str], clock: Clock, role: type[L]) -> L:
    """``role``'s ledger, as its declarations name it (``resources.LedgerSettings``)."""
    import boto3  # noqa: PLC0415 - keeps the layer importable without AWS configured

    settings = LedgerSettings.from_env(env)
    return role(
        settings.table_name,
        client=boto3.client("dynamodb"),
        ttl_days=settings.ttl_days,
        max_reopens=settings.max_reopens,
        clock=clock,
    )


def queue_from_env[Q: JobSender](env: Mapping[str, str], role: type[Q]) -> Q:
    """``role``'s job queue, the one ``QUEUE_URL`` names, on an SQS client."""
    import boto3  # noqa: PLC0415

    return role(QUEUE_URL.read(env), client=boto3.client("sqs"))
