"""The reconciler's cadence as ``template.yaml`` deploys it, for the benchmarks' records."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Cadence:
    """When the reconciler runs and what it recovers, from the template's defaults."""

    schedule: str  # the rule's ScheduleExpression
    interval_seconds: float  # that expression in seconds
    threshold_seconds: float  # RECONCILE_THRESHOLD_SECONDS: settled longer ago is recovered
    overlap_seconds: float  # RECONCILE_OVERLAP_SECONDS: listed again before the watermark
    full_sweep_seconds: float  # RECONCILE_FULL_SWEEP_SECONDS: the slow sweeps' period
    gap_memory_seconds: float  # RECONCILE_GAP_MEMORY_SECONDS: job list at every run after a gap

    @classmethod
    def from_template(cls) -> Cadence:
        """The template's reconciler, its parameters at their defaults."""
        from bench.scale_world import TemplateReconciler
        from scrape_pipeline.reconciler.settings import ReconcilerSettings

        template = TemplateReconciler.read()
        settings = ReconcilerSettings.from_env(template.env)
        return cls(
            schedule=template.schedule,
            interval_seconds=template.interval,
            threshold_seconds=settings.job_list.threshold_seconds,
            overlap_seconds=settings.job_list.overlap_seconds,
            full_sweep_seconds=settings.full_sweep_seconds,
            gap_memory_seconds=settings.gap_memory_seconds,
        )

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> Cadence:
        return cls(**saved)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def every(self) -> str:
        """``every minute``, ``every 10 minutes``, ``every 90 s``."""
        return every(self.interval_seconds)


def every(seconds: float) -> str:
    """A period in words: ``every minute``, ``every 10 minutes``, ``every 90 s``."""
    if seconds == 60:
        return "every minute"
    if seconds % 60 == 0:
        return f"every {seconds / 60:g} minutes"
    return f"every {seconds:g} s"
