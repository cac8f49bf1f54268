"""The reconciler wired to AWS and the API from the environment."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.resources import RESULTS_BUCKET
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.bulk_send import BulkSender
from scrape_pipeline.processor.results import ResultStore
from scrape_pipeline.reconciler.recovery import Recoverer
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.wiring import shared

# The reconciler may wait a little for a throttled page (it runs minutes apart); the processor
# never waits: its messages come back later instead.
RECONCILER_RETRY = RetryPolicy(max_attempts=4, base_delay=1.0, max_delay=10.0, deadline=30.0)


def build_reconciler(env: Mapping[str, str], *, clock: Clock) -> Reconciler:
    """The reconciler on real clients."""
    settings = ReconcilerSettings.from_env(env)
    ledger = shared.ledger_from_env(env, clock, Ledger)
    client = shared.geonode_client(env, RECONCILER_RETRY, clock)
    recoverer = Recoverer(
        ledger, shared.queue_from_env(env, BulkSender), settings.recovery, clock=clock
    )
    # No bucket (the CLI's ``reconcile`` given only the ledger and the queue): no run sweep.
    bucket = env.get(RESULTS_BUCKET.name, "")
    return Reconciler(
        settings,
        ledger=ledger,
        client=client,
        recoverer=recoverer,
        clock=clock,
        emitter=shared.emitter_from_env(env, ledger),
        results=ResultStore(bucket) if bucket else None,
    )
