"""The Geonode client the processor and the reconciler call (the receiver calls none)."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.api_key import api_key_store
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.listing_lag import ListingLag
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.geonode.settings import GeonodeSettings
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.work import WorkLedger


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
