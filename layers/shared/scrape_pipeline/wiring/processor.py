"""The processor wired to AWS and the API from the environment."""

from __future__ import annotations

from collections.abc import Mapping

import boto3

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import RESULTS_BUCKET
from scrape_pipeline.geonode.retry import NO_RETRY
from scrape_pipeline.jobs import JobKey, Source
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.message import JobMessage
from scrape_pipeline.processor.processing import JobProcessor
from scrape_pipeline.processor.queue import JobQueue
from scrape_pipeline.processor.resubmission import Resubmitter
from scrape_pipeline.processor.results import ResultStore
from scrape_pipeline.processor.settings import ProcessorSettings
from scrape_pipeline.wiring import shared

type BuiltProcessor = tuple[JobProcessor, JobQueue, WorkLedger]


def build_processor(env: Mapping[str, str], *, clock: Clock) -> BuiltProcessor:
    """The processor, the queue it sends delayed copies to and the ledger it leases from, on real
    clients; it never waits on a throttled call (``NO_RETRY``)."""
    settings = ProcessorSettings.from_env(env)
    bucket = RESULTS_BUCKET.read(env)
    ledger = shared.ledger_from_env(env, clock, WorkLedger)
    client = shared.geonode_client(env, NO_RETRY, clock)
    queue = shared.queue_from_env(env, JobQueue)

    def wake(parent: JobKey) -> None:
        # A batch or crawl whose retried item settled: any message makes the processor settle it.
        queue.send(JobMessage(parent, Source.WATCH))

    processor = JobProcessor(
        settings,
        ledger=ledger,
        client=client,
        results=ResultStore(bucket, client=boto3.client("s3")),
        resubmitter=Resubmitter(
            client,
            ledger,
            per_chain_limit=settings.max_resubmissions_per_url,
            lag=shared.listing_lag(env, ledger, clock),
        ),
        clock=clock,
        emitter=shared.emitter_from_env(env, ledger, linger=settings.event_linger_seconds),
        waker=wake,
    )
    return processor, queue, ledger
