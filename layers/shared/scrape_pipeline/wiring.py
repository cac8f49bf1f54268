"""Building the processor and the reconciler from the environment, with real AWS clients.

The resources they need are settings too, read through ``scrape_pipeline.settings``:

    | variable | default | why |
    |---|---|---|
    | LEDGER_TABLE_NAME | (required) | the ledger table |
    | QUEUE_URL | (required) | the job queue (the processor re-sends delayed copies to it) |
    | RESULTS_BUCKET | (required, processor) | where results and dead-letter records go |
    | LEDGER_TTL_DAYS | 90 | rows expire this long after their last change |
    | MAX_REOPENS | 3 | times a job closed as unknown or never settled may be reopened |
    | GEONODE_API_KEY_SECRET_ID | (or GEONODE_SCRAPER_API_KEY) | see ``api_key`` |

Each Lambda's own knobs are its settings class's (``ProcessorSettings``, ``ReconcilerSettings``).

boto3 honours ``AWS_ENDPOINT_URL``, so the same wiring serves Lambda and the local stack.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from scrape_pipeline.api_key import api_key_store
from scrape_pipeline.clock import Clock, active_clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.retry import NO_RETRY, RetryPolicy
from scrape_pipeline.ledger import DEFAULT_MAX_REOPENS, DEFAULT_TTL_DAYS, Bookkeeping, Ledger
from scrape_pipeline.processing import JobProcessor, ProcessorSettings
from scrape_pipeline.queue import JobQueue
from scrape_pipeline.reconciler import Reconciler, ReconcilerSettings
from scrape_pipeline.recovery import Recoverer, RecoverySettings
from scrape_pipeline.resubmission import Resubmitter
from scrape_pipeline.results import ResultStore
from scrape_pipeline.settings import GeonodeSettings, read_int, require

# The reconciler may wait a little for a throttled page (it runs minutes apart); the processor
# never waits: its messages come back later instead.
RECONCILER_RETRY = RetryPolicy(max_attempts=4, base_delay=1.0, max_delay=10.0, deadline=30.0)


def _ledger(env: Mapping[str, str], clock: Clock) -> Ledger:
    import boto3  # noqa: PLC0415 - keeps the layer importable without AWS configured

    (table,) = require(env, "LEDGER_TABLE_NAME")
    ttl_days = read_int(env, "LEDGER_TTL_DAYS", DEFAULT_TTL_DAYS)
    max_reopens = read_int(env, "MAX_REOPENS", DEFAULT_MAX_REOPENS, minimum=0)
    return Ledger(
        table,
        client=boto3.client("dynamodb"),
        ttl_days=ttl_days,
        max_reopens=max_reopens,
        clock=clock,
    )


def _queue(env: Mapping[str, str]) -> JobQueue:
    import boto3  # noqa: PLC0415

    (url,) = require(env, "QUEUE_URL")
    return JobQueue(url, client=boto3.client("sqs"))


def _client(env: Mapping[str, str], retry: RetryPolicy, clock: Clock) -> GeonodeClient:
    # A rotated key reaches a warm container at its first 401 (see api_key).
    keys = api_key_store(env, clock=clock)
    return GeonodeClient(
        keys.key(),
        settings=GeonodeSettings.from_env(env),
        retry=retry,
        clock=clock,
        refresh_key=keys.refreshed,
    )


def build_processor(
    env: Mapping[str, str] | None = None, *, clock: Clock | None = None
) -> tuple[JobProcessor, JobQueue]:
    """The processor and the queue it sends delayed copies to."""
    import boto3  # noqa: PLC0415

    env = os.environ if env is None else env
    clock = clock or active_clock()
    settings = ProcessorSettings.from_env(env)
    (bucket,) = require(env, "RESULTS_BUCKET")
    ledger = _ledger(env, clock)
    client = _client(env, NO_RETRY, clock)
    processor = JobProcessor(
        settings,
        ledger=ledger,
        client=client,
        results=ResultStore(bucket, client=boto3.client("s3")),
        resubmitter=Resubmitter(
            client, Bookkeeping(ledger), per_chain_limit=settings.max_resubmissions_per_url
        ),
        clock=clock,
    )
    return processor, _queue(env)


def build_reconciler(
    env: Mapping[str, str] | None = None, *, clock: Clock | None = None
) -> Reconciler:
    """The reconciler."""
    env = os.environ if env is None else env
    clock = clock or active_clock()
    settings = ReconcilerSettings.from_env(env)
    ledger = _ledger(env, clock)
    client = _client(env, RECONCILER_RETRY, clock)
    recoverer = Recoverer(
        ledger,
        _queue(env),
        RecoverySettings(stale_after_seconds=settings.stale_after_seconds),
        clock=clock,
    )
    return Reconciler(settings, ledger=ledger, client=client, recoverer=recoverer, clock=clock)
