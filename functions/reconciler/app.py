"""Reconciler Lambda (EventBridge schedule): find what the webhooks missed, enqueue it, count it.
Wiring only: the logic is ``scrape_pipeline.reconciler.run``."""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from scrape_pipeline.clock import active_clock
from scrape_pipeline.reconciler.report import emit_run
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.wiring.reconciler import build_reconciler

logger = Logger()
metrics = Metrics()


@functools.cache
def get_reconciler() -> Reconciler:
    """The reconciler, built once per container."""
    return build_reconciler(os.environ, clock=active_clock())


# Forget the cached one (tests change the environment between cases).
reset_reconciler = get_reconciler.cache_clear


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One run in the invocation's remaining time; the counts by source are the webhook gap.
    A failed sweep is a metric and a log line, not a raise (``Reconciler.run``)."""
    report = get_reconciler().run(lambda: context.get_remaining_time_in_millis() / 1000.0)
    emit_run(metrics, report, os.environ.get("POWERTOOLS_SERVICE_NAME", "reconciler"))
    summary = report.summary()
    if report.errors:
        logger.error("reconciler sweeps failed", extra={"errors": report.errors})
    logger.info("reconciled", extra=summary)
    return summary
