"""The submitter function's runs wired to AWS and the API from the environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import boto3

from scrape_pipeline.aws_errors import AWS_ERRORS, is_no_such_key, unavailable
from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import LedgerSettings
from scrape_pipeline.geonode.retry import NO_RETRY
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.evidence import DeliveryLogCandidates
from scrape_pipeline.runs.inside import Inside, InsideSettings, ObjectReader, Sender
from scrape_pipeline.runs.journal import Journal
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.posting import SubmitterSettings
from scrape_pipeline.wiring import shared

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client
    from types_boto3_sqs.client import SQSClient


def build_inside(env: Mapping[str, str], *, clock: Clock) -> Inside:
    """The submitter function's logic on real clients; each POST is one request (``NO_RETRY``):
    the engine classifies its failure and backs off itself."""
    settings = InsideSettings.from_env(env)
    table = LedgerSettings.from_env(env)
    client = shared.geonode_client(env, NO_RETRY, clock)
    # The journal's rows live in the ledger's table, and expire as its rows do; a batch or
    # crawl is born announced (its ledger row is in the transaction that records its id).
    journal = DynamoJournal(
        table.table_name,
        client=boto3.client("dynamodb"),
        lease_s=settings.lease_s,
        ttl_days=table.ttl_days,
    )

    # A batch or crawl in doubt is adopted once the delivery log names it: its settlement is
    # logged there whether or not its webhook reached the stack (no grant: the API's log).
    evidence = DeliveryLogCandidates(client)
    lag = shared.listing_lag(env, shared.ledger_from_env(env, clock, WorkLedger), clock)

    def submitter(journal: Journal) -> Submitter:
        # The same pace as the CLI's: several POSTs in flight at the rate the API allows; the
        # listing lag as the reconciler measures it now (one BatchGetItem a round). Never wait
        # out another's lease, nor the lag behind an entry in doubt: a delayed continuation does.
        return Submitter(
            journal,
            client,
            clock=clock,
            settings=SubmitterSettings(
                wait_for_leases=False, wait_for_doubts=False, listing_delay_s=lag.allowed()
            ),
            pace=Pace(clock),
            evidence=evidence,
        )

    return Inside(
        settings,
        journal=journal,
        submitter=submitter,
        read=object_reader(boto3.client("s3")),
        send=queue_sender(boto3.client("sqs"), settings.queue_url),
        clock=clock,
    )


def object_reader(s3: S3Client) -> ObjectReader:
    """Reads an object's text (None when absent: the options file is optional)."""

    def read(bucket: str, key: str) -> str | None:
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        except AWS_ERRORS as exc:
            if is_no_such_key(exc):
                return None
            raise unavailable("s3", "GetObject", exc) from exc
        return body.read().decode("utf-8")

    return read


def queue_sender(sqs: SQSClient, queue_url: str) -> Sender:
    """Sends a continuation to the submissions queue."""

    def send(body: str, delay_s: int) -> None:
        try:
            sqs.send_message(QueueUrl=queue_url, MessageBody=body, DelaySeconds=delay_s)
        except AWS_ERRORS as exc:
            raise unavailable("sqs", "SendMessage", exc) from exc

    return send
