"""The reconciler's settings: its own knobs and the job list's, the watch sweep's and recovery's."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self

from scrape_pipeline.config.settings import FromEnv, declared, integer, number, read_declared
from scrape_pipeline.geonode.client import DELIVERIES_PAGE_MAX
from scrape_pipeline.reconciler.recovery import RecoverySettings
from scrape_pipeline.reconciler.sweeps.job_list import JobListSettings
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings


@dataclass(frozen=True)
class ReconcilerSettings(FromEnv):
    """The reconciler's knobs, the job list's, the watch sweep's and recovery's among them (each
    sweep gets its weight's fraction of the time left when it starts, the margin kept back)."""

    job_list: JobListSettings = field(default_factory=JobListSettings)
    watch: WatchSettings = field(
        default_factory=lambda: WatchSettings(first_poll_seconds=JobListSettings.threshold_seconds)
    )
    recovery: RecoverySettings = field(default_factory=RecoverySettings)
    full_sweep_seconds: float = number(
        "RECONCILE_FULL_SWEEP_SECONDS",
        600.0,
        "the stuck-rows and delivery-log sweeps run this often, and at every run while "
        "unfinished (a backlog is worked at the full pace); the watch sweep runs every run",
    ).field()
    gap_memory_seconds: float = number(
        "RECONCILE_GAP_MEMORY_SECONDS",
        900.0,
        "the job list runs at every run (each minute) while a run has recovered a job within "
        "this long, and at the full-sweep cadence once webhooks have been complete for it. A "
        "first run counts as a gap, so a new deployment is watched every minute for its first "
        "15 minutes. Measured on the 1,000-job pipeline benchmark (no webhook dropped): see the "
        "Benchmarks section",
    ).field()
    delivery_overlap_seconds: float = number(
        "DELIVERY_OVERLAP_SECONDS",
        60.0,
        "the delivery log is re-read this far before its checkpoint",
    ).field()
    rows_per_state: int = integer(
        "RECONCILE_ROWS_PER_STATE", 200, "stuck rows per ledger page"
    ).field()
    delivery_page_size: int = integer(
        "DELIVERY_PAGE_SIZE",
        DELIVERIES_PAGE_MAX,
        "delivery-log rows per page: the API's maximum, so a backlog costs the fewest calls",
        maximum=DELIVERIES_PAGE_MAX,
    ).field()
    safety_margin_seconds: float = number(
        "RECONCILE_SAFETY_MARGIN_SECONDS",
        20.0,
        "of the Lambda's remaining time, kept back for one slow page call and the checkpoint "
        "writes",
    ).field()
    share_stuck_rows: float = number(
        "RECONCILE_SHARE_STUCK_ROWS",
        0.2,
        "weight of the stuck-rows sweep in the run's time: each sweep gets its weight's fraction "
        "of the time left when it starts, so time one leaves unused flows to the next",
    ).field()
    share_delivery_log: float = number(
        "RECONCILE_SHARE_DELIVERY_LOG", 0.4, "weight of the delivery-log sweep"
    ).field()
    share_job_list: float = number(
        "RECONCILE_SHARE_JOB_LIST",
        0.4,
        "weight of the job-list sweep (it runs last, so it takes what the others leave)",
    ).field()
    share_watch: float = number("RECONCILE_SHARE_WATCH", 0.1, "weight of the watch sweep").field()
    share_outbox: float = number(
        "RECONCILE_SHARE_OUTBOX", 0.05, "weight of the outbox sweep (it runs first)"
    ).field()
    share_runs: float = number(
        "RECONCILE_SHARE_RUNS", 0.05, "weight of the run sweep (runs' manifests and events)"
    ).field()
    outbox_grace_seconds: float = number(
        "OUTBOX_GRACE_SECONDS",
        90.0,
        "the outbox sweep emits an outcome's event once it has waited this long (a crash kept "
        "it from the bus): longer than a processor invocation (ProcessorTimeoutSeconds, at "
        "most 60), whose batch's events are still to be emitted by it",
    ).field()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """Read the settings; ``SettingsError`` names a bad value (an integer given "2.5" too)."""
        env = os.environ if env is None else env
        lists = JobListSettings.from_env(env)
        watch = WatchSettings(
            poll_seconds=declared(WatchSettings)["poll_seconds"].read(env),
            first_poll_seconds=lists.threshold_seconds,
            listing_lag_seconds=lists.overlap_seconds,
            max_pages=lists.max_pages,
        )
        recovery = RecoverySettings.from_env(env)
        return cls(job_list=lists, watch=watch, recovery=recovery, **read_declared(cls, env))
