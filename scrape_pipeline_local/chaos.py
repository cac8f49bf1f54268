"""Chaos profiles: what goes wrong during a local run, on the sender's side and on ours.

Sender-side faults are the simulator's (drop, duplicate, delay, reorder, 429/5xx bursts,
a disabled subscription, a secret rotated mid-run). Our-side faults are crashes injected
into the real handlers at the worst moments the architecture names: between the receiver's
ledger write and its SQS send, between the processor's result write and its DONE, and
between a resubmission POST and its ledger write. Crashes are drawn from a seeded RNG.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from scrape_pipeline.jobs import Outcome
from scrape_pipeline_local.simulator.config import ContentSizeModel

DAY_SECONDS = 86_400.0
LONG_JOB_MIN_SECONDS = DAY_SECONDS
LONG_JOB_MAX_SECONDS = 2 * DAY_SECONDS
LONG_RUN_SLACK_SECONDS = 4 * 3600.0  # after the last long job could settle


@dataclass(frozen=True)
class ChaosProfile:
    """One run's faults; times are seconds after the run starts (simulated)."""

    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    reorder_window_s: float = 0.0
    delay_max_s: float = 0.0
    api_error_rate: float = 0.0
    outage: tuple[float, float] | None = None  # the receiver answers 503 in [start, end)
    rotate_at: float | None = None  # the extract subscription's secret is rotated
    throttle: tuple[float, float] | None = None  # 429s from the API: (start, duration)
    server_errors: tuple[float, float] | None = None  # 503s from the API: (start, duration)
    webhooks_disabled: bool = False  # every subscription disabled: the reconciler alone
    receiver_crash_rate: float = 0.0  # dies after the ledger put, before the SQS send
    processor_crash_rate: float = 0.0  # dies after storing the result, before DONE
    resubmit_crash_rate: float = 0.0  # dies after the resubmission POST, before the ledger
    retryable_failure_rate: float | None = None  # None: the simulator's default
    content_size: ContentSizeModel = "natural"  # page sizes; "lognormal": the heavy tail
    front_limit_bytes: int | None = None  # bodies over this answered 413 (None: the default)
    reconciler_env: tuple[tuple[str, str], ...] = ()  # reconciler settings for this run
    malformed_rate: float = 0.0  # poison jobs: every GET answers 200 without job_id
    processor_timeout: float | None = None  # the processor's Timeout, wall seconds
    processor_env: tuple[tuple[str, str], ...] = ()  # processor settings for this run
    # The workload's shape: shares of units in batches and crawls, and their sizes.
    batch_share: float = 0.15
    crawl_share: float = 0.15
    batch_urls: int = 5
    crawl_pages: int = 10
    # The long tail: this share of jobs, batch items and crawl pages runs for days.
    long_job_rate: float = 0.0
    long_job_min_s: float = LONG_JOB_MIN_SECONDS
    long_job_max_s: float = LONG_JOB_MAX_SECONDS
    horizon_s: float = 5400.0  # the run stops this long after it started, finished or not
    # Step once only unsettled work is left (everything settled has its outcome): a long
    # job's days pass in fewer steps. None: the usual step all along.
    idle_step_s: float | None = None
    # A busy account: this many unsettled jobs, two days old, that never settle during the
    # run and are nobody's workload (they live in the simulator only: older than the job
    # list's lookback, they reach the ledger never; the watch sweep's listing reads them all).
    background_jobs: int = 0
    listing_lag: tuple[float, float] | None = None  # the API lists a job this late (min, max)


PROFILES: dict[str, ChaosProfile] = {
    "none": ChaosProfile(),
    "default": ChaosProfile(
        drop_rate=0.2,
        duplicate_rate=0.2,
        reorder_window_s=10.0,
        delay_max_s=5.0,
        outage=(120.0, 180.0),
        rotate_at=300.0,
        throttle=(240.0, 60.0),
    ),
    "heavy": ChaosProfile(
        drop_rate=0.5,
        duplicate_rate=0.3,
        reorder_window_s=30.0,
        delay_max_s=20.0,
        api_error_rate=0.05,
        outage=(60.0, 240.0),
        rotate_at=200.0,
        throttle=(100.0, 180.0),
        receiver_crash_rate=0.05,
        processor_crash_rate=0.05,
        resubmit_crash_rate=0.3,
    ),
    # The matrix: one fault at a time (tests/chaos).
    "drop-20": ChaosProfile(drop_rate=0.2),
    "drop-50": ChaosProfile(drop_rate=0.5),
    "duplicates-30": ChaosProfile(duplicate_rate=0.3),
    "reorder": ChaosProfile(reorder_window_s=60.0, delay_max_s=30.0),
    "receiver-outage": ChaosProfile(outage=(60.0, 300.0)),
    "crash-put-send": ChaosProfile(receiver_crash_rate=0.2),
    "crash-store-done": ChaosProfile(processor_crash_rate=0.2),
    "crash-resubmit": ChaosProfile(resubmit_crash_rate=1.0, retryable_failure_rate=0.2),
    "throttle-429": ChaosProfile(throttle=(30.0, 240.0)),
    "burst-5xx": ChaosProfile(server_errors=(30.0, 180.0)),
    "rotation": ChaosProfile(rotate_at=120.0),
    "webhooks-off": ChaosProfile(webhooks_disabled=True),
    # An hour of receiver outage with some drops. Delivery-log pages of 5 rows make a run's
    # budget (20 pages) 100 failed attempts a subscription, less than the outage leaves at 100
    # jobs, so runs resume passes; the job list keeps its usual pages.
    "outage-backlog": ChaosProfile(
        drop_rate=0.1,
        outage=(60.0, 3660.0),
        reconciler_env=(("DELIVERY_PAGE_SIZE", "5"),),
    ),
}
# Heavy-tailed pages amid the default faults. The real limit (about 4.7 MB) is reached by
# about 0.1 % of pages; lowered to 512 KiB (6 %), a 100-job run sends a few deliveries over it.
PROFILES["large-payloads"] = replace(
    PROFILES["default"], content_size="lognormal", front_limit_bytes=524_288
)
# 5 % poison jobs (every GET malformed) amid 20 % dropped and 20 % duplicated webhooks: each
# is dead-lettered after the processor's MAX_ATTEMPTS, the rest judged as usual.
PROFILES["poison"] = ChaosProfile(drop_rate=0.2, duplicate_rate=0.2, malformed_rate=0.05)
# A 2 s processor (wall time) with a 0.5 s stop margin, amid the default faults, and the work
# mostly in batches of up to 200 URLs and crawls of up to 100 pages. A 50-item page takes about
# 0.6 s to store here: at 1,000 jobs a batch (4 pages) spans invocations, checkpointed page by
# page; at 100 jobs the one batch (70 URLs) fits one. A shorter timeout would cut the 100-job
# batch too, but a page that alone outlasts the invocation is killed on every attempt (its
# strikes make it poison), so a loaded machine would fail the run for a reason of its own.
PROFILES["timeouts"] = replace(
    PROFILES["default"],
    processor_timeout=2.0,
    processor_env=(("STOP_MARGIN_SECONDS", "0.5"),),
    batch_share=0.7,
    crawl_share=0.2,
    batch_urls=200,
    crawl_pages=100,
)
# 5 % of the work runs 1 to 2 days, amid 20 % dropped webhooks: parked WATCHING, then woken
# by its webhook or the reconciler. A long job settles within two days of its submission (in
# the first 600 s); the horizon adds four hours for its outcome (the finish bound is under one).
# Once only the long jobs are left, 300 s steps: 100 jobs' two days take about 1.5 min here.
PROFILES["long-running"] = ChaosProfile(
    drop_rate=0.2,
    long_job_rate=0.05,
    long_job_min_s=LONG_JOB_MIN_SECONDS,
    long_job_max_s=LONG_JOB_MAX_SECONDS,
    horizon_s=LONG_JOB_MAX_SECONDS + LONG_RUN_SLACK_SECONDS,
    idle_step_s=300.0,
)

# 10,000 unsettled jobs in the account besides the workload, every webhook dropped, a fifth of
# the work running 20 to 40 minutes: batches and crawls are polled on their schedule and the
# extract jobs woken from a listing of the busy account that spans runs. The page cap (20 a
# run) stands for a run's time share: the 100 pages a full listing takes do not fit one run.
PROFILES["busy-account"] = ChaosProfile(
    drop_rate=1.0,
    background_jobs=10_000,
    long_job_rate=0.2,
    long_job_min_s=1200.0,
    long_job_max_s=2400.0,
    horizon_s=600.0 + 2400.0 + 1800.0,
    idle_step_s=60.0,
    reconciler_env=(("RECONCILE_MAX_PAGES", "20"),),
)
# The API lists each job four to four and a half minutes after its created_at, amid 35 %
# dropped webhooks: the job list's watermark follows the list's own timestamps.
PROFILES["listing-lag"] = ChaosProfile(drop_rate=0.35, listing_lag=(240.0, 265.0))


class _Crash(BaseException):
    """An injected crash: the invocation dies here, as if the Lambda was killed.

    A ``BaseException``, like the runtime's own timeout: a killed Lambda runs none of the
    handler's ``except Exception`` blocks (the processor's catch-all would release the lease
    and count a strike, which a dead process never does). The local invoker treats it as a
    failed invocation: the receiver answers 502, the processor's whole batch comes back.
    """


def install_crashes(stack: Any, profile: ChaosProfile, seed: int) -> dict[str, int]:
    """Wrap the live handlers' collaborators so they die at the named moments; returns counts."""
    rng = random.Random(seed)
    counts = {"receiver": 0, "processor": 0, "resubmit": 0}
    if profile.receiver_crash_rate:
        queue = stack.handlers["receiver"].get_receiver()._queue
        send = queue.send

        def crashing_send(message: Any, **kwargs: Any) -> Any:
            if rng.random() < profile.receiver_crash_rate:
                counts["receiver"] += 1
                raise _Crash("receiver killed between the ledger put and the SQS send")
            return send(message, **kwargs)

        queue.send = crashing_send
    if profile.processor_crash_rate or profile.resubmit_crash_rate:
        ledger = stack.handlers["processor"].get_processor()[0]._ledger
        finish = ledger.finish

        def crashing_finish(key: Any, owner: str, outcome: Outcome, detail: Any = None) -> Any:
            if outcome is Outcome.STORED and rng.random() < profile.processor_crash_rate:
                counts["processor"] += 1
                raise _Crash("processor killed after storing, before DONE")
            if outcome is Outcome.RESUBMITTED and rng.random() < profile.resubmit_crash_rate:
                counts["resubmit"] += 1
                raise _Crash("processor killed after the resubmission POST")
            return finish(key, owner, outcome, detail)

        ledger.finish = crashing_finish
    return counts
