"""The metrics a reconciler run emits (namespace ScrapePipeline, dimension ``service``): the
template's alarms and dashboard name these strings (``tests/pipeline`` checks they match)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit, single_metric

if TYPE_CHECKING:
    from aws_lambda_powertools import Metrics

    from scrape_pipeline.reconciler.report import ReconcileReport


class ReconcilerMetric(StrEnum):
    """One series of the reconciler's; each run emits every one (a zero too) but a lag it could
    not measure."""

    # The run's total (service only: ReconcilerRecoveriesAlarm), and one per source.
    JOBS_RECOVERED = "JobsRecovered"
    LIST_PAGES = "ReconcilerListPages"
    # Sweeps that failed this run (service only: ReconcileSweepFailedAlarm), and one per sweep.
    SWEEP_FAILED = "ReconcileSweepFailed"
    # 1 per run that returned: its absence is ReconcilerHeartbeatAlarm.
    RUN_COMPLETED = "ReconcilerRunCompleted"
    # Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has waited: OldestUnsettledAlarm.
    OLDEST_UNSETTLED = "OldestUnsettledSeconds"


def emit_run(metrics: Metrics, report: ReconcileReport, service: str) -> None:
    """Every series of one run: its totals by service (the alarms'), then one per source and per
    failed sweep (the dashboard's)."""
    count = MetricUnit.Count
    metrics.add_metric(
        name=ReconcilerMetric.JOBS_RECOVERED, unit=count, value=report.total_recovered
    )
    metrics.add_metric(name=ReconcilerMetric.LIST_PAGES, unit=count, value=report.list_pages)
    metrics.add_metric(name=ReconcilerMetric.SWEEP_FAILED, unit=count, value=len(report.errors))
    metrics.add_metric(name=ReconcilerMetric.RUN_COMPLETED, unit=count, value=1)
    if report.oldest_unsettled_seconds is not None:
        metrics.add_metric(
            name=ReconcilerMetric.OLDEST_UNSETTLED,
            unit=MetricUnit.Seconds,
            value=report.oldest_unsettled_seconds,
        )
    dimensions = {"service": service}
    for source, recovered in report.recovered.items():
        with single_metric(
            name=ReconcilerMetric.JOBS_RECOVERED,
            unit=count,
            value=recovered,
            default_dimensions=dimensions,
        ) as metric:
            metric.add_dimension(name="source", value=source)
    for sweep in report.errors:
        with single_metric(
            name=ReconcilerMetric.SWEEP_FAILED, unit=count, value=1, default_dimensions=dimensions
        ) as metric:
            metric.add_dimension(name="sweep", value=sweep)
