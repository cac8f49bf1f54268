"""Chaos profiles: what goes wrong during a local run, on the sender's side and on ours.

Sender-side faults are the simulator's (drop, duplicate, delay, reorder, 429/5xx bursts,
a disabled subscription, a secret rotated mid-run). Our-side faults are crashes injected
into the real handlers at the worst moments the architecture names: between the receiver's
ledger write and its SQS send, between the processor's result write and its DONE, between
its DONE writes and their events' PutEvents, and between a resubmission POST and its ledger
write. Crashes are drawn from a seeded RNG.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, replace
from typing import Any

from scrape_pipeline.jobs import Outcome
from scrape_pipeline_local.simulator.config import ContentSizeModel
from scrape_pipeline_local.simulator.faults import JobAnswer

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
    # Secrets rotated during the run: (seconds after the start, event type), in time order;
    # each subscription's previous secret stays valid for rotation_grace_s.
    rotations: tuple[tuple[float, str], ...] = ()
    rotation_grace_s: float = 3600.0
    throttle: tuple[float, float] | None = None  # 429s from the API: (start, duration)
    server_errors: tuple[float, float] | None = None  # 503s from the API: (start, duration)
    webhooks_disabled: bool = False  # every subscription disabled: the reconciler alone
    receiver_crash_rate: float = 0.0  # dies after the ledger put, before the SQS send
    processor_crash_rate: float = 0.0  # dies after storing the result, before DONE
    resubmit_crash_rate: float = 0.0  # dies after the resubmission POST, before the ledger
    # Dies at its batch's end after the DONE writes, before their events' PutEvents (per call):
    # the events wait in the rows' outbox for the reconciler's sweep.
    emit_crash_rate: float = 0.0
    item_post_crash_rate: float = 0.0  # dies after an item's retry POST, before noting its job
    # Dies mid-page, like an invocation its timeout stops whatever the processor foresaw: each
    # batch or crawl once, ten items into its second page, and then before storing an item at
    # this rate.
    page_kill_rate: float | None = None
    retryable_failure_rate: float | None = None  # None: the simulator's default
    # Batch items' and crawl pages' own retryable failure rate (None: retryable_failure_rate).
    item_retryable_failure_rate: float | None = None
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
    # Units in batches and crawls are this many times their shares of the jobs (extract jobs
    # stay at theirs): big batches and crawls without a crowd of small jobs around them.
    batch_crawl_scale: float = 1.0
    # This share of batches and crawls is cancelled this long after submission, while items
    # run (those drain: the API completes them after it answered "cancelled").
    cancel_share: float = 0.0
    cancel_after_s: float = 60.0
    # Durations of extract jobs and batch items, and of crawl pages (None: the simulator's).
    job_duration_s: tuple[float, float] | None = None
    crawl_page_duration_s: tuple[float, float] | None = None
    # The long tail: this share of jobs, batch items and crawl pages runs for days.
    long_job_rate: float = 0.0
    long_job_min_s: float = LONG_JOB_MIN_SECONDS
    long_job_max_s: float = LONG_JOB_MAX_SECONDS
    horizon_s: float = 5400.0  # the run stops this long after it started, finished or not
    # Step once only unsettled work is left (everything settled has its outcome): a long
    # job's days pass in fewer steps. None: the usual step all along.
    idle_step_s: float | None = None
    # Sick jobs: every ``sick_every``-th extract job's own GET fails (cycling through
    # ``sick_answers``) for ``sick_for_s`` after its submission, and every ``lagging_every``-th
    # (offset by half) answers 404 for ``lagging_for_s``, while every other job is answered.
    sick_every: int = 0  # 0: none
    sick_answers: tuple[JobAnswer, ...] = (503, "timeout", 502, 504)
    sick_for_s: float = 0.0
    lagging_every: int = 0
    lagging_for_s: float = 0.0
    post_errors: tuple[float, float] | None = None  # 503s to every POST: (start, duration)
    # A busy account: this many unsettled jobs, two days old, that never settle during the
    # run and are nobody's workload (they live in the simulator only: older than the job
    # list's lookback, they reach the ledger never; the watch sweep's listing reads them all).
    background_jobs: int = 0
    listing_lag: tuple[float, float] | None = None  # the API lists a job this late (min, max)
    # This share of the extract URLs and of the batch URLs goes through submission runs (an
    # async run and a batch run, uploaded to ``submissions/`` for the submitter function),
    # the rest straight to the API: each run is then audited (``audit --run``) and its
    # ``Run Completed`` checked on the bus (``scrape_pipeline_local.run_checks``).
    runs_share: float = 0.0
    # This share of the job-creating POSTs the pipeline makes (the runs' submitter, the
    # processor's resubmissions and item retries; never the demo's own) create their job and
    # lose the answer, a 504 or none (``scrape_pipeline_local.lost_answers``).
    lost_answer_rate: float = 0.0


PROFILES: dict[str, ChaosProfile] = {
    "none": ChaosProfile(),
    "default": ChaosProfile(
        drop_rate=0.2,
        duplicate_rate=0.2,
        reorder_window_s=10.0,
        delay_max_s=5.0,
        outage=(120.0, 180.0),
        rotations=((300.0, "extract_completed"),),
        throttle=(240.0, 60.0),
    ),
    "heavy": ChaosProfile(
        drop_rate=0.5,
        duplicate_rate=0.3,
        reorder_window_s=30.0,
        delay_max_s=20.0,
        api_error_rate=0.05,
        outage=(60.0, 240.0),
        rotations=((200.0, "extract_completed"),),
        throttle=(100.0, 180.0),
        receiver_crash_rate=0.05,
        processor_crash_rate=0.05,
        resubmit_crash_rate=0.3,
        emit_crash_rate=0.05,
    ),
    # The matrix: one fault at a time (tests/chaos).
    "drop-20": ChaosProfile(drop_rate=0.2),
    "drop-50": ChaosProfile(drop_rate=0.5),
    "duplicates-30": ChaosProfile(duplicate_rate=0.3),
    "reorder": ChaosProfile(reorder_window_s=60.0, delay_max_s=30.0),
    "receiver-outage": ChaosProfile(outage=(60.0, 300.0)),
    "crash-put-send": ChaosProfile(receiver_crash_rate=0.2),
    "crash-store-done": ChaosProfile(processor_crash_rate=0.2),
    # Half the extract and batch URLs in runs: a run's resubmitted jobs make chains to follow.
    "crash-resubmit": ChaosProfile(
        resubmit_crash_rate=1.0, retryable_failure_rate=0.2, runs_share=0.5
    ),
    # Not in the matrix's list (tests/local/test_emit_crash.py runs it): a third of the
    # processor's emits die before PutEvents, amid dropped webhooks.
    "crash-emit": ChaosProfile(emit_crash_rate=0.3, drop_rate=0.2),
    "throttle-429": ChaosProfile(throttle=(30.0, 240.0)),
    "burst-5xx": ChaosProfile(server_errors=(30.0, 180.0)),
    "rotation": ChaosProfile(rotations=((120.0, "extract_completed"),)),
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
# A few extract jobs whose own GET fails for four hours (5xx or no answer) and a few whose GET
# answers 404 for 20 minutes (past the processor's bound of about eight) though their webhook
# is verified or the job list shows them, amid 20 % dropped webhooks and a 90 s window of 503s
# to every POST (resubmissions included). The sick jobs are parked and polled slowly, then
# stored once their GET answers; 300 s steps while only they are left.
SICK_FOR_SECONDS = 4 * 3600.0
PROFILES["failing-get"] = ChaosProfile(
    drop_rate=0.2,
    sick_every=20,
    sick_for_s=SICK_FOR_SECONDS,
    lagging_every=20,
    lagging_for_s=1200.0,
    post_errors=(200.0, 90.0),
    horizon_s=SICK_FOR_SECONDS + 3 * 3600.0,
    idle_step_s=300.0,
)

# Each subscription's secret rotated in turn while the work is delivered, its 120 s grace over
# before the next one, amid 20 % dropped and 20 % duplicated webhooks: every subscription's
# deliveries verify throughout, whoever was rotated last.
PROFILES["rotation-one-of-three"] = ChaosProfile(
    drop_rate=0.2,
    duplicate_rate=0.2,
    rotations=(
        (60.0, "extract_completed"),
        (240.0, "batch_completed"),
        (420.0, "crawl_completed"),
    ),
    rotation_grace_s=120.0,
)


# Batches and crawls too big for one invocation, amid the default faults: at 100 jobs a
# 100-URL batch and a 200-page crawl, at 1,000 a 1,000-URL batch and a 2,000-page crawl, with
# heavy-tailed pages (some multi-MB). A 5 s processor with a 0.5 s stop margin: a 50-item page
# takes about 0.5-2 s here, so each job spans invocations. Besides the timeouts the processor
# does not foresee (a page slower than those timed before it), each batch and crawl has one
# attempt killed mid-page, and 0.1 % of item writes more kill theirs; a killed invocation's
# batch comes back after the queue's visibility timeout. No job may be taken for poison: every
# attempt that stored a page made progress. (A shorter timeout would kill a loaded machine's
# first page on every attempt: a page that outlasts the invocation is poison.)
PROFILES["big-crawls"] = replace(
    PROFILES["timeouts"],  # its faults and stop margin
    content_size="lognormal",
    processor_timeout=5.0,
    page_kill_rate=0.001,
    batch_share=0.1,
    crawl_share=0.2,
    batch_urls=1000,
    crawl_pages=2500,
    batch_crawl_scale=10.0,
)
# 70 % of the batches and crawls cancelled a minute after submission, amid the default faults,
# with items running 1-5 minutes: the API answers "cancelled" at once while running items
# drain for minutes, and the watch sweep (at 90 s, 3 and 6 minutes of age) polls them
# meanwhile. Every item the API completed must be stored, and each job closed only after.
PROFILES["cancelled-crawls"] = replace(
    PROFILES["default"],
    batch_share=0.3,
    crawl_share=0.3,
    cancel_share=0.7,
    cancel_after_s=60.0,
    job_duration_s=(60.0, 300.0),
    crawl_page_duration_s=(60.0, 240.0),
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
# Half the extract and batch URLs go through runs: their audits read late-listed jobs by GET.
# 5 % of the pipeline's POSTs lose their answer after the API made the job: each stays in doubt
# until a look-up made after the listing lag allowed for finds it, and no URL is posted twice.
PROFILES["listing-lag"] = ChaosProfile(
    drop_rate=0.35, listing_lag=(240.0, 265.0), runs_share=0.5, lost_answer_rate=0.05
)

# 10 % of batch items and crawl pages fail retryably (UPSTREAM_TIMEOUT), the work mostly in
# batches of up to 100 URLs and crawls of up to 50 pages (at 100 jobs 200 URLs and 150 pages,
# at 1,000 ten times as many), amid 20 % dropped webhooks, the processor killed after a fifth
# of its item POSTs: each item is retried as a linked extract job (adopted, not posted again,
# after a kill), stored once, or dead-lettered when its retry fails for good or its bound.
# Half the extract and batch URLs go through runs, so a run's items make chains too.
PROFILES["batch-item-retries"] = ChaosProfile(
    runs_share=0.5,
    drop_rate=0.2,
    item_retryable_failure_rate=0.1,
    item_post_crash_rate=0.2,
    batch_share=0.4,
    crawl_share=0.3,
    batch_urls=100,
    crawl_pages=50,
    batch_crawl_scale=5.0,
)


class _Crash(BaseException):
    """An injected crash: the invocation dies here, as if the Lambda was killed.

    A ``BaseException``, like the runtime's own timeout: a killed Lambda runs none of the
    handler's ``except Exception`` blocks (the processor's catch-all would release the lease
    and count a strike, which a dead process never does). The local invoker treats it as a
    failed invocation: the receiver answers 502, the processor's whole batch comes back.
    """


def _killed(stack: Any, why: str) -> _Crash:
    """The processor's crash, its memory lost with it: the events its batch's earlier outcomes
    hold for the batch's end are gone (their rows keep them for the outbox sweep), as in a
    Lambda whose process died; the local runtime keeps the module, so they are dropped here."""
    emitter = stack.handlers["processor"].get_processor()[0]._emitter
    if emitter is not None:
        emitter._held.clear()
    return _Crash(why)


def install_crashes(stack: Any, profile: ChaosProfile, seed: int) -> dict[str, int]:
    """Wrap the live handlers' collaborators so they die at the named moments; returns counts."""
    rng = random.Random(seed)
    counts = {
        "receiver": 0,
        "processor": 0,
        "resubmit": 0,
        "mid-page": 0,
        "emit": 0,
        "item-post": 0,
    }
    if profile.receiver_crash_rate:
        queue = stack.handlers["receiver"].get_receiver().queue
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

        def crashing_finish(
            key: Any, owner: str, outcome: Outcome, detail: Any = None, **kwargs: Any
        ) -> Any:
            if outcome is Outcome.STORED and rng.random() < profile.processor_crash_rate:
                counts["processor"] += 1
                raise _killed(stack, "processor killed after storing, before DONE")
            if outcome is Outcome.RESUBMITTED and rng.random() < profile.resubmit_crash_rate:
                counts["resubmit"] += 1
                raise _killed(stack, "processor killed after the resubmission POST")
            return finish(key, owner, outcome, detail, **kwargs)

        ledger.finish = crashing_finish
    if profile.page_kill_rate is not None:
        _kill_mid_page(stack, profile.page_kill_rate, rng, counts)
    if profile.emit_crash_rate:
        _kill_before_put_events(stack, profile.emit_crash_rate, rng, counts)
    if profile.item_post_crash_rate:
        _kill_after_item_posts(stack, profile.item_post_crash_rate, rng, counts)
    return counts


def _kill_before_put_events(
    stack: Any, rate: float, rng: random.Random, counts: dict[str, int]
) -> None:
    """Kill the processor as its batch's events go to the bus, the rows already DONE.

    The emitter has taken the held events out of memory when it calls the bus, so a kill there
    loses them as a dead process would; the rows' outbox keeps them for the reconciler.
    """
    emitter = stack.handlers["processor"].get_processor()[0]._emitter
    put = emitter.put

    def crashing_put(events: Any) -> Any:
        if rng.random() < rate:
            counts["emit"] += 1
            raise _Crash("processor killed after its DONE writes, before PutEvents")
        return put(events)

    emitter.put = crashing_put


class _KillingClient:
    """The resubmitter's Geonode client, dying after the API answered some item POSTs: the job
    exists and nothing noted it, so the next holder must find it in the job list. Only item
    retries die (``armed`` in the thread running one), not a failed job's resubmission."""

    def __init__(self, client: Any, rate: float, rng: random.Random, counts: dict[str, int]):
        self._client = client
        self._rate = rate
        self._rng = rng
        self._counts = counts
        self.armed = threading.local()

    def submit_extract(self, *args: Any, **kwargs: Any) -> Any:
        submitted = self._client.submit_extract(*args, **kwargs)
        if getattr(self.armed, "on", False) and self._rng.random() < self._rate:
            self._counts["item-post"] += 1
            raise _Crash("processor killed after an item's retry POST")
        return submitted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _kill_after_item_posts(
    stack: Any, rate: float, rng: random.Random, counts: dict[str, int]
) -> None:
    resubmitter = stack.handlers["processor"].get_processor()[0]._resubmitter
    killing = resubmitter._client = _KillingClient(resubmitter._client, rate, rng, counts)
    retry_item = resubmitter.retry_item

    def armed_retry_item(*args: Any, **kwargs: Any) -> Any:
        killing.armed.on = True
        try:
            return retry_item(*args, **kwargs)
        finally:
            killing.armed.on = False

    resubmitter.retry_item = armed_retry_item


# Where each batch or crawl is killed once: ten items into its second page.
_FIRST_KILL_AT_ITEM = 60


def _kill_mid_page(stack: Any, rate: float, rng: random.Random, counts: dict[str, int]) -> None:
    """Kill processor attempts while they store a batch's or crawl's items (see ChaosProfile)."""
    results = stack.handlers["processor"].get_processor()[0]._results
    store = results.store
    killed: set[str] = set()

    def crashing_store(*args: Any, item: int | None = None, **kwargs: Any) -> Any:
        if item is not None:
            job_id = str(args[1])  # store(kind, job_id, data, metadata, item=...)
            first = item == _FIRST_KILL_AT_ITEM and job_id not in killed
            if first or rng.random() < rate:
                killed.add(job_id)
                counts["mid-page"] += 1
                raise _killed(stack, "processor killed mid-page")
        return store(*args, item=item, **kwargs)

    results.store = crashing_store
