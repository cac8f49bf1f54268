"""What the functions' wiring shares, on real AWS clients: the ledger and the job queue in the
role each function runs, the Geonode client, the listing lag, and the outcome events' emitter."""

from __future__ import annotations

from collections.abc import Mapping

import boto3

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import EVENT_BUS_NAME, QUEUE_URL, LedgerSettings
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.geonode.api_key import api_key_store
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.listing_lag import ListingLag
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.geonode.settings import GeonodeSettings
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.table import LedgerTable
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.message import JobSender


def ledger_from_env[L: LedgerTable](env: Mapping[str, str], clock: Clock, role: type[L]) -> L:
    """``role``'s ledger, as its declarations name it (``resources.LedgerSettings``)."""
    settings = LedgerSettings.from_env(env)
    return role(
        settings.table_name,
        client=boto3.client("dynamodb"),
        ttl_days=settings.ttl_days,
        max_reopens=settings.max_reopens,
        clock=clock,
    )


def queue_from_env[Q: JobSender](env: Mapping[str, str], role: type[Q]) -> Q:
    """``role``'s job queue, the one ``QUEUE_URL`` names."""
    return role(QUEUE_URL.read(env), client=boto3.client("sqs"))


def geonode_client(env: Mapping[str, str], retry: RetryPolicy, clock: Clock) -> GeonodeClient:
    """A client with the key from the environment; a rotated key reaches a warm container at
    its first 401 (see ``api_key``)."""
    keys = api_key_store(env, clock=clock)
    return GeonodeClient(
        keys.key(),
        settings=GeonodeSettings.from_env(env),
        retry=retry,
        clock=clock,
        refresh_key=keys.refreshed,
    )


def listing_lag(env: Mapping[str, str], ledger: WorkLedger | None, clock: Clock) -> ListingLag:
    """The listing lag allowed for: the floor from the environment, the reconciler's measured
    lag from the ledger (none: the floor alone)."""
    floor = GeonodeSettings.from_env(env).listing_lag_floor_s
    books = Bookkeeping(ledger) if ledger is not None else None
    return ListingLag(books, clock=clock, floor_s=floor)


def emitter_from_env(
    env: Mapping[str, str], ledger: WorkLedger, *, linger: float = 0.0
) -> Emitter | None:
    """The emitter for the bus ``EVENT_BUS_NAME`` names (None: none), lingering ``linger`` s."""
    name = EVENT_BUS_NAME.read(env)
    if not name:
        return None
    return Emitter(name, ledger, client=boto3.client("events"), linger=linger)
