"""The metrics a reconciler run emits (namespace ScrapePipeline, dimension ``service``).

template.yaml's alarms and dashboard name these strings; ``tests/pipeline`` checks that the
names a real run emits and the names the template alarms on are the same.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ReconcilerMetric"]


class ReconcilerMetric(StrEnum):
    """One series of the reconciler's; each run emits every one (a zero too) but the lag,
    which a run that could not read the ledger leaves out."""

    # The run's total (service only: ReconcilerRecoveriesAlarm), and one per source.
    JOBS_RECOVERED = "JobsRecovered"
    LIST_PAGES = "ReconcilerListPages"
    # Sweeps that failed this run (service only: ReconcileSweepFailedAlarm), and one per sweep.
    SWEEP_FAILED = "ReconcileSweepFailed"
    # 1 per run that returned: its absence is ReconcilerHeartbeatAlarm.
    RUN_COMPLETED = "ReconcilerRunCompleted"
    # Seconds the oldest RECEIVED/ENQUEUED/PROCESSING row has waited: OldestUnsettledAlarm.
    OLDEST_UNSETTLED = "OldestUnsettledSeconds"
