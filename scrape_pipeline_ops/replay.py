"""Replaying a webhook's failed deliveries (the CLI's ``deliveries replay``, rotation's 401s): the
delivery-log sweep's scan, once, with no checkpoint read or moved."""

from __future__ import annotations

from scrape_pipeline.jobs import Source
from scrape_pipeline.reconciler.report import SweepResult
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.reconciler.sweeps import Budget
from scrape_pipeline.reconciler.sweeps.delivery_log import DeliveryLogSweep


def replay_failed(
    reconciler: Reconciler,
    webhook_id: str,
    *,
    since: float,
    only_status: int | None = None,
    source: str = Source.DELIVERY_LOG,
) -> SweepResult:
    """Ensure the jobs of failed deliveries since ``since``; ``only_status`` narrows (401).
    A failing page is raised."""
    log = DeliveryLogSweep(reconciler.settings, **reconciler.parts)
    result = SweepResult()
    budget = Budget.no_deadline().capped(reconciler.settings.job_list.max_pages)
    scan = log.scan(webhook_id, since, 1, result, budget, only_status=only_status)
    if scan.error is not None:
        raise scan.error
    result.complete = scan.next_page is None
    result.recovered = log.ensure(scan.keys, source)
    return result
