"""``make demo``: the whole pipeline on this machine, under fire, judged from outside.

A workload of extract jobs, batches and crawls runs through the local stack (the real Lambda
handlers, moto, the Geonode simulator) on a simulated clock while a chaos profile drops,
duplicates, delays and reorders webhooks, takes the receiver down for a while, rotates the
secret mid-run and throttles the API. Then it reports what happened, counting "lost",
"processed twice" and "wrongly dead-lettered" from the simulator's record and S3's object
versions (``scrape_pipeline_local.judge``), never from the pipeline's own word, and exits 1 if
any is not zero. ``scrape-pipeline audit``'s own code then judges the run's window from the API
and the bucket alone, and must agree with the judge on every unit (``agreement``). A rule of
the run's own on the stack's bus receives every event: each job with a told outcome must have
one (``bus_record``), and the run waits for them as it waits for the outcomes. A profile's
``runs_share`` sends part of the work through submission runs (``demo_runs``): each is audited
with ``audit --run``'s code and its ``Run Completed`` checked on the bus (``run_checks``).

    python -m scrape_pipeline_local.demo [--jobs 200] [--seed 7]
        [--chaos default|none|heavy|<matrix scenario>]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from scrape_pipeline.geonode.errors import GeonodeError, RateLimitedError, ServerError
from scrape_pipeline.processor.results import DEAD_LETTER_PREFIX, RESULTS_PREFIX
from scrape_pipeline.processor.settings import ProcessorSettings
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings
from scrape_pipeline_local import idle
from scrape_pipeline_local.agreement import compare, summary
from scrape_pipeline_local.aws_calls import CallRecorder
from scrape_pipeline_local.bus_record import (
    BusRecord,
    EventFigures,
    WireTimes,
    figures,
    percentile,
)
from scrape_pipeline_local.chaos import PROFILES, ChaosProfile, install_crashes
from scrape_pipeline_local.demo_runs import DemoRun, split
from scrape_pipeline_local.function_env import functions_write_to
from scrape_pipeline_local.item_retries_judge import ITEM_KINDS, ItemRetries, judge_item_retries
from scrape_pipeline_local.judge import (
    MAX_EXAMPLES,
    UNSETTLED,
    Listing,
    Unit,
    Verdict,
    judge,
    read_listing,
    refusals,
)
from scrape_pipeline_local.large_results import LargeResults, measure
from scrape_pipeline_local.lost_answers import LostAnswerFigures, LostAnswers
from scrape_pipeline_local.run_checks import (
    RUN_COMPLETED_WAIT_SECONDS,
    Evidence,
    RunChecks,
    audit_run,
    check_runs,
)
from scrape_pipeline_local.simulator import content
from scrape_pipeline_local.simulator.gateway import Gateway
from scrape_pipeline_ops.audit import AuditReport, Window, audit, of_window
from scrape_pipeline_ops.audit.report import named

STEP_SECONDS = 5.0
CHECK_EVERY_STEPS = 6  # how often the (costly) "is everything finished" check runs
SUBMIT_SPAN_SECONDS = 600.0
# How long after a unit settles its outcome may take: a dropped webhook waits for the
# threshold and the next run, a lost message for the staleness bound and the next run, and the
# processor's own retries add at most its longest wait. The chaos matrix judges by it, and a
# run past its horizon goes on while a settled unit is still within it (below).
_R = ReconcilerSettings()
FINISH_BOUND_SECONDS = (
    _R.job_list.threshold_seconds + _R.recovery.stale_after_seconds + 2 * 600 + 600
)
# How long after its outcome an event may take: an emit lost in a crash waits for the outbox's
# grace and the next reconciler run (a minute); a second run's room for a busy or failed one.
EVENT_BOUND_SECONDS = _R.outbox_grace_seconds + 2 * 60.0
# The simulator's routes that read one job (its request counts are by route template).
JOB_ROUTES = ("GET /v1/extract/{job_id}", "GET /v1/batch/{batch_id}", "GET /v1/crawl/{crawl_id}")


@dataclass
class Report(Verdict):
    """The figures: the judge's from outside (simulator, S3 versions); latency by the ledger."""

    submitted: Counter[str] = field(default_factory=Counter)
    duplicates_suppressed: int = 0
    recovered: Counter[str] = field(default_factory=Counter)
    latency_p50: float = 0.0
    latency_p99: float = 0.0
    latency_max: float = 0.0
    latencies: list[float] = field(default_factory=list)  # settle to stored, per stored unit
    # The same for the units whose every webhook was dropped: only the reconciler found them.
    dropped_latency_p50: float = 0.0
    dropped_latency_p99: float = 0.0
    dropped_stored: int = 0
    crashes: dict[str, int] = field(default_factory=dict)
    requests_per_job: float = 0.0
    simulated_seconds: float = 0.0
    wall_seconds: float = 0.0
    poison_gets_max: int = 0  # Geonode GETs of the most-read poison job
    # Sick jobs (their own GET failed for a while): per job, its GETs and the hours from its
    # creation to its outcome (or the run's end); its latency runs from its recovery, apart.
    sick_reads: dict[str, tuple[int, float]] = field(default_factory=dict)
    sick_stored: int = 0
    sick_latency_max: float = 0.0
    poller_batches: int = 0  # processor invocations
    poller_timeouts: int = 0  # processor invocations stopped at the function's timeout
    aws_calls_per_job: float = 0.0  # AWS calls the functions made (and their event source)
    cancelled_in_flight: int = 0  # items running when their batch or crawl was cancelled
    # Batches and crawls whose outcome was recorded before their last item settled.
    closed_early: int = 0
    closed_early_examples: list[str] = field(default_factory=list)
    list_pages: int = 0  # GET /v1/extract/jobs answered (both sweeps)
    watch_list_pages: list[int] = field(default_factory=list)  # per reconciler run
    watch_listings: int = 0  # complete listings of the unsettled jobs (watch sweep)
    large: LargeResults = field(default_factory=LargeResults)
    # Deliveries answered 401 though signed with a valid secret (the simulator's record), and
    # those rightly refused: signed with a secret retired longer than the grace ago.
    refused_valid: int = 0
    refused_examples: list[str] = field(default_factory=list)
    refused_retired: int = 0
    # Deliveries answered 400: the simulator only sends well-formed ones, so each is a refusal
    # of a valid delivery (a body the receiver reads wrong, a timestamp it cannot place).
    refused_bad_request: int = 0
    rotated: int = 0  # secrets rotated during the run, by the simulator's record
    # ``scrape-pipeline audit`` over the demo's window (the API over HTTP, the bucket), its
    # wall time, and where it and the judge differ (``agreement``), each unit named.
    audit: AuditReport | None = None
    audit_seconds: float = 0.0
    audit_differences: list[str] = field(default_factory=list)
    # The audit's cost seen from outside it: its S3 list calls (botocore's record of every
    # call), the job-list pages the simulator answered it, and the result and dead-letter
    # entries (versions, delete markers) the bucket held, counted by a listing of the demo's.
    audit_s3_list_calls: int = 0
    audit_list_pages: int = 0
    bucket_entries: int = 0
    # The events a subscriber of the stack's bus received, judged by job against the outcomes.
    events: EventFigures = field(default_factory=EventFigures)
    # The batch items and crawl pages that failed retryably, and what their retries became.
    item_retries: ItemRetries = field(default_factory=ItemRetries)
    # The submission runs: each audited with ``audit --run``'s code, its completion on the bus.
    runs: RunChecks = field(default_factory=RunChecks)
    # The POST answers lost on the pipeline's paths: POSTs per URL and their time in doubt.
    lost_answers: LostAnswerFigures = field(default_factory=LostAnswerFigures)

    @property
    def audit_failed(self) -> bool:
        """The audit found a job missing or doubled, or judged a unit unlike the judge."""
        failing = self.audit is None or bool(self.audit.failures())
        return failing or bool(self.audit_differences)

    def audit_lines(self) -> list[tuple[str, str]]:
        """The audit's rows: its counts by verdict, its failures, its differences."""
        if self.audit is None:
            return [("AUDIT NOT RUN", "1")]
        counts = self.audit.counts()
        return [
            ("audit of the window (API and S3)", summary(self.audit)),
            ("AUDIT: MISSING", str(counts["missing"])),
            ("AUDIT: DOUBLED", str(counts["doubled"])),
            ("AUDIT DISAGREES WITH THE JUDGE", str(len(self.audit_differences))),
        ]

    def lines(self) -> list[tuple[str, str]]:
        """Label / value rows, in the order the README describes them."""
        submitted = ", ".join(f"{n} {kind}" for kind, n in sorted(self.submitted.items()))
        recovered = ", ".join(f"{n} {src}" for src, n in sorted(self.recovered.items())) or "0"
        return [
            ("submitted", f"{sum(self.submitted.values())} ({submitted})"),
            ("settled (jobs, batch items, crawl pages)", str(self.settled)),
            ("stored", str(self.stored)),
            ("resubmitted (retryable failures)", str(self.resubmitted)),
            ("dead-lettered", str(self.dead_lettered)),
            ("cancelled", str(self.cancelled)),
            ("duplicate deliveries suppressed", str(self.duplicates_suppressed)),
            ("recovered by the reconciler", recovered),
            ("poison jobs' units dead-lettered", str(self.poisoned)),
            ("LOST", str(self.lost)),
            ("PROCESSED TWICE", str(self.processed_twice)),
            ("WRONGLY DEAD-LETTERED", str(self.wrongly_dead_lettered)),
            ("POISON MISHANDLED", str(self.poison_mishandled)),
            ("REFUSED 401 WITH A VALID SECRET", str(self.refused_valid)),
            ("refused 401, secret retired past its grace", str(self.refused_retired)),
            *self.audit_lines(),
            *self.runs.rows(),
            *self.lost_answers.rows(),
            *self.events.lines(),
            (
                "settle-to-stored latency p50 / p99",
                f"{self.latency_p50:.1f} s / {self.latency_p99:.1f} s",
            ),
            (
                "settle-to-stored p50 / p99, webhooks dropped",
                f"{self.dropped_latency_p50:.1f} s / {self.dropped_latency_p99:.1f} s"
                f" ({self.dropped_stored} stored)",
            ),
            ("Geonode requests per settled job", f"{self.requests_per_job:.3f}"),
            ("AWS calls per settled job", f"{self.aws_calls_per_job:.3f}"),
            ("items in flight when cancelled", str(self.cancelled_in_flight)),
            ("CLOSED BEFORE ITS ITEMS SETTLED", str(self.closed_early)),
            (
                "processor invocations / timed out",
                f"{self.poller_batches} / {self.poller_timeouts}",
            ),
            (
                "simulated time / wall time",
                f"{self.simulated_seconds:.0f} s / {self.wall_seconds:.1f} s",
            ),
            *([self.large.line()] if self.large.stored else []),
            *self.item_retries.rows(),
        ]


class Demo:
    """Runs one workload under one chaos profile and measures it."""

    def __init__(self, jobs: int, chaos: str, seed: int) -> None:
        from scrape_pipeline_local.clock import ManualClock
        from scrape_pipeline_local.simulator import SimConfig
        from scrape_pipeline_local.stack import LocalStack, StackSettings

        self.jobs = jobs
        self.seed = seed
        self.profile: ChaosProfile = PROFILES[chaos]
        self.clock = ManualClock(start=time.time())
        sim = SimConfig(
            seed=seed,
            content_size=self.profile.content_size,
            long_job_rate=self.profile.long_job_rate,
            long_job_min_s=self.profile.long_job_min_s,
            long_job_max_s=self.profile.long_job_max_s,
            crawl_max_pages_cap=max(SimConfig.crawl_max_pages_cap, self.profile.crawl_pages),
            listing_lag_min_s=(self.profile.listing_lag or (0.0, 0.0))[0],
            listing_lag_max_s=(self.profile.listing_lag or (0.0, 0.0))[1],
        )
        if self.profile.retryable_failure_rate is not None:
            sim = replace(sim, retryable_failure_rate=self.profile.retryable_failure_rate)
        if self.profile.item_retryable_failure_rate is not None:
            rate = self.profile.item_retryable_failure_rate
            sim = replace(sim, item_retryable_failure_rate=rate)
        if self.profile.job_duration_s is not None:
            low, high = self.profile.job_duration_s
            sim = replace(sim, job_duration_min_s=low, job_duration_max_s=high)
        if self.profile.crawl_page_duration_s is not None:
            low, high = self.profile.crawl_page_duration_s
            sim = replace(sim, crawl_page_duration_min_s=low, crawl_page_duration_max_s=high)
        # Metrics stay on: each invocation flushes its EMF records into the functions' log
        # (main() routes it to a file). Powertools 3.37 with POWERTOOLS_METRICS_DISABLED keeps
        # every value in memory and prints a metric's 100th value anyway.
        env = {
            "POWERTOOLS_LOG_LEVEL": "ERROR",
            **dict(self.profile.reconciler_env),
            **dict(self.profile.processor_env),
        }
        if self.profile.front_limit_bytes is not None:
            # The receiver's own 413 stands for the platform's: same answer, same delivery log.
            env["MAX_BODY_BYTES"] = str(self.profile.front_limit_bytes)
        settings = StackSettings(env=env, processor_timeout=self.profile.processor_timeout)
        self.stack = LocalStack(self.clock, sim, settings)
        self.started_at = 0.0
        self.done_at: dict[str, float] = {}  # job id -> when the ledger recorded its outcome
        # (kind, job id) -> when: the outcomes the ledger recorded that owe an event.
        self.owed: dict[tuple[str, str], float] = {}
        self.bus: BusRecord | None = None  # the run's subscriber on the stack's bus
        # Requests to each job's own route (GET extract, batch, crawl): see _counting_job_reads.
        self.job_reads: Counter[str] = Counter()
        self._reads_lock = threading.Lock()
        # (when, kind, job id): the batches and crawls to cancel, soonest first.
        self._cancels: list[tuple[float, str, str]] = []
        self._cancel_draws = random.Random(seed)
        self.aws_calls = CallRecorder()
        self._jump_ledger: tuple[Any, WatchSettings] | None = None
        self.wire = WireTimes()  # when each event was written and put, in wall time
        self._extracts = 0  # extract jobs submitted so far: picks the sick ones
        self.runs: list[DemoRun] = []  # the workload's submission runs (``plan``)
        self._quiet_since: float | None = None  # when all but the runs' completions was done

    # -- workload --------------------------------------------------------------------------

    def plan(self) -> list[tuple[float, str, Any]]:
        """(offset, kind, payload): by default 70 % extract jobs, 15 % batch items, 15 % pages."""
        p = self.profile
        batch_urls = max(1, round(self.jobs * p.batch_share))
        crawl_pages = max(1, round(self.jobs * p.crawl_share))
        extracts = max(0, self.jobs - batch_urls - crawl_pages)
        batch_urls = round(batch_urls * p.batch_crawl_scale)
        crawl_pages = round(crawl_pages * p.batch_crawl_scale)
        parts = split(
            [f"https://demo.example/page/{i}" for i in range(extracts)],
            [f"https://demo.example/batch/{i}" for i in range(batch_urls)],
            p.runs_share,
            p.batch_urls,
        )
        self.runs = parts.runs
        items: list[tuple[str, Any]] = [("extract", url) for url in parts.extracts]
        items += [("run", run) for run in parts.runs]
        per_batch = p.batch_urls
        for b in range(0, len(parts.batch_urls), per_batch):
            items.append(("batch", parts.batch_urls[b : b + per_batch]))
        per_crawl = p.crawl_pages
        site = "demo.example"
        if per_crawl > content.site_size(f"https://{site}"):
            site = f"{per_crawl}-pages.{site}"  # a site big enough for the crawl
        for c in range(0, crawl_pages, per_crawl):
            items.append(("crawl", (f"https://{site}/site/{c}", min(per_crawl, crawl_pages - c))))
        spacing = SUBMIT_SPAN_SECONDS / max(1, len(items))
        # interleave kinds so batches and crawls run alongside extracts
        # (crc32, not hash(): str hashes differ per process, and a seed must reproduce a run)
        items.sort(key=lambda item: zlib.crc32(str(item[1]).encode()) % 997)
        return [(i * spacing, kind, payload) for i, (kind, payload) in enumerate(items)]

    def run(self, progress: Any = None) -> Report:
        """Start the stack, run the workload under the profile, measure, stop the stack."""
        # The recorder is entered before the stack starts: the sessions made then report to it.
        with self._counting_job_reads(), self.aws_calls, self.wire:
            return self._run(progress)

    def _run(self, progress: Any) -> Report:
        stack = self.stack.start()
        report = Report()
        wall = time.perf_counter()
        try:
            self.bus = self._subscribe()
            self.started_at = self.clock.time()
            client = self._sender_faults()
            report.crashes = install_crashes(stack, self.profile, self.seed)
            plan = self.plan()
            run_urls = {url for demo_run in self.runs for url in demo_run.urls}
            lost = LostAnswers(stack.sim.faults, self.profile.lost_answer_rate, run_urls)
            fired: set[str] = set()
            total_units = self.jobs
            steps = 0
            step = STEP_SECONDS
            while True:
                steps += 1
                elapsed = self.clock.time() - self.started_at
                while plan and plan[0][0] <= elapsed:
                    _, kind, payload = plan[0]
                    try:
                        self._submit(client, kind, payload, report)
                    except (RateLimitedError, ServerError):
                        # The user waits and submits again (the simulator's injected 429/5xx
                        # happen before the API acts, so a second POST creates no twin).
                        break
                    plan.pop(0)
                self._cancel_due(client, elapsed, report)
                self._chaos(elapsed, fired)
                at = self.clock.time()
                with lost.armed():  # the pipeline's POSTs only: the demo's are made above
                    stack.step(step)
                lost.follow(self._journal_jobs, at)
                checking = steps % CHECK_EVERY_STEPS == 0
                if checking:
                    done = self._observe()
                    if progress is not None:
                        progress(min(done, total_units), total_units)
                    step = self._next_step(plan, elapsed)
                self.clock.advance(self._idle_jump(plan, elapsed, step))
                if self._done(bool(plan), checking, elapsed):
                    break
            self._observe()
            self._measure(report)
            sim = stack.sim
            report.lost_answers = lost.figures(sim.submissions(), sim.truth_jobs())
            self._audit(report)  # last: its API and AWS calls are not the pipeline's
        finally:
            report.wall_seconds = time.perf_counter() - wall
            report.simulated_seconds = self.clock.time() - self.started_at
            stack.stop()
        return report

    def _sender_faults(self) -> Any:
        """The profile's faults on the simulator's side; returns the user's API client."""
        stack, p = self.stack, self.profile
        stack.sim.faults.update(
            drop_rate=p.drop_rate,
            duplicate_rate=p.duplicate_rate,
            reorder_window_s=p.reorder_window_s,
            delay_max_s=p.delay_max_s,
            api_error_rate=p.api_error_rate,
        )
        if p.background_jobs:
            from scrape_pipeline_local.stack import API_KEY

            stack.sim.add_background_jobs(API_KEY, p.background_jobs, age_s=2 * 86_400.0)
        client = stack.client()
        if p.webhooks_disabled:
            for webhook_id in stack.webhook_ids.values():
                client.update_webhook(webhook_id, is_active=False)
        if p.malformed_rate:
            stack.sim.faults.update(malformed_rate=p.malformed_rate)
        return client

    def _done(self, planned: bool, checking: bool, elapsed: float) -> bool:
        """The run stops: everything finished, or past the horizon with no unit awaited."""
        if not planned and checking and self._finished():
            return True
        horizon = self.profile.horizon_s
        if elapsed <= horizon:
            return False
        return elapsed > horizon + FINISH_BOUND_SECONDS or (checking and not self._awaited(elapsed))

    def _awaited(self, elapsed: float) -> bool:
        """Some unit settled less than FINISH_BOUND_SECONDS ago and has no outcome yet.

        The workload's own length varies (a resubmitted long job settles late, a batch waits
        for its slowest item): past the horizon such a unit still has its bound to be stored,
        so a late settle is judged by the bound, not by where the horizon happened to fall.
        """
        now = self.started_at + elapsed
        for unit, job in self._units():
            if job["status"] in UNSETTLED or job["status"] == "cancelled":
                continue
            if unit.job_id not in self.done_at and now - job["settled_at"] < FINISH_BOUND_SECONDS:
                return True
        # An outcome whose event has not come yet, within the outbox sweep's bound.
        assert self.bus is not None
        came = self.bus.jobs
        return any(j not in came and now - at < EVENT_BOUND_SECONDS for j, at in self.owed.items())

    def _next_step(self, plan: Sequence[Any], elapsed: float) -> float:
        """The usual step, or the profile's idle step once only unsettled work is left."""
        idle = self.profile.idle_step_s
        if idle is None or plan or elapsed < SUBMIT_SPAN_SECONDS:
            return STEP_SECONDS
        units = self._units()
        # A batch or crawl is settled once all its items are: until then it is not waiting.
        running = {unit.job_id for unit, job in units if job["status"] in UNSETTLED}
        # A sick job is polled on a slow schedule by design: not a reason for short steps.
        running |= set(self.stack.sim.faults.sick_jobs())
        for unit, job in units:
            if unit.job_id in running or job["status"] == "cancelled":
                continue
            if unit.job_id not in self.done_at:
                return STEP_SECONDS  # settled work waits for its outcome: watch it closely
        return idle

    def _idle_jump(self, plan: Sequence[Any], elapsed: float, step: float) -> float:
        """The idle stretch to skip (``idle``): only once every settled unit has its outcome,
        event and run report, and short of the horizon and the next cancellation. Tried at
        every idle step, not only at checks: a wake point (a watch poll, a settlement) ends a
        jump, and the slots after it are as idle as those before; a unit settled since the
        last check (``done_at`` not read yet) keeps the usual step's care until the next."""
        if step == STEP_SECONDS or self._next_step(plan, elapsed) == STEP_SECONDS:
            return 0.0
        if not self._all_told():
            return 0.0
        offsets = [self.profile.horizon_s] + [at for at, _, _ in self._cancels[:1]]
        now = self.clock.time()
        until = min(self.stack.quiet_until(), self.started_at + min(offsets))
        if until - now > step:
            if self._jump_ledger is None:  # one client and one read of the settings, for every step
                self._jump_ledger = self._ledger(), ReconcilerSettings.from_env().watch
            ledger, watch = self._jump_ledger
            by_listing = idle.listing_wakes(ledger)
            until = min(until, idle.next_watch_poll(ledger, watch, now, by_listing=by_listing))
        return idle.jump(now, until, step)

    def _all_told(self) -> bool:
        """Every outcome's event and every run's Run Completed came."""
        assert self.bus is not None
        told = {arrival.run for arrival in self.bus.runs}
        came = self.bus.jobs
        return all(job in came for job in self.owed) and all(r.name in told for r in self.runs)

    @contextmanager
    def _counting_job_reads(self) -> Iterator[None]:
        """Count every request to a job's own route, per job id, while the run lasts.

        The simulator counts requests by route template only, which cannot name the job. Its
        gateway labels each ``/v1`` request once, before it admits or refuses it (fault, rate
        limit, auth), so wrapping that labelling sees every request, answered or not.
        """
        original = Gateway._route
        reads, lock = self.job_reads, self._reads_lock

        def labelled(gateway: Gateway, scope: Any) -> str:
            route: str = original(gateway, scope)
            if route in JOB_ROUTES:
                with lock:
                    reads[str(scope["path"]).rstrip("/").rsplit("/", 1)[-1]] += 1
            return route

        Gateway._route = labelled  # type: ignore[method-assign, assignment]
        try:
            yield
        finally:
            Gateway._route = original  # type: ignore[method-assign]

    def _poison_gets_max(self) -> int:
        """The Geonode GETs of the most-read poison job (0 without poison jobs)."""
        faults = self.stack.sim.faults
        return max(
            (n for job_id, n in self.job_reads.items() if faults.is_malformed(job_id)), default=0
        )

    def _submit(self, client: Any, kind: str, payload: Any, report: Report) -> None:
        from scrape_pipeline.jobs import JobKind
        from scrape_pipeline_ops.submissions import expect

        if kind == "run":  # uploaded as a user would: the submitter function posts it
            assert self.stack.resources is not None
            payload.upload(self._s3(), self.stack.resources.bucket)
            report.submitted[payload.units] += len(payload.urls)
            return
        if kind == "extract":
            self._maybe_sick(client.submit_extract(payload).job_id)
            report.submitted["extract jobs"] += 1
        elif kind == "batch":
            job_id = client.create_batch(payload).job_id
            expect(self._ledger(), JobKind.BATCH, job_id)  # no API lists batches: announce it
            report.submitted["batch items"] += len(payload)
        else:
            url, pages = payload
            job_id = client.create_crawl(url, max_pages=pages).job_id
            expect(self._ledger(), JobKind.CRAWL, job_id)
            report.submitted["crawl pages"] += pages
        if kind != "extract" and self._cancel_draws.random() < self.profile.cancel_share:
            due = self.clock.time() - self.started_at + self.profile.cancel_after_s
            self._cancels.append((due, kind, job_id))

    def _cancel_due(self, client: Any, elapsed: float, report: Report) -> None:
        """Cancel the batches and crawls whose time has come (a crawl through the API's DELETE;
        a batch through the simulator, the API having no such route)."""
        from scrape_pipeline.geonode.errors import ConflictError

        while self._cancels and self._cancels[0][0] <= elapsed:
            _, kind, job_id = self._cancels[0]
            try:
                if kind == "crawl":
                    report.cancelled_in_flight += client.cancel_crawl(job_id).in_flight_pages
                else:
                    report.cancelled_in_flight += self.stack.sim.cancel_batch(job_id)[1]
            except (RateLimitedError, ServerError):
                return  # the user tries again a moment later
            except ConflictError:
                pass  # finished already: nothing to cancel
            self._cancels.pop(0)

    def _maybe_sick(self, job_id: str) -> None:
        """Give every n-th extract job the profile's fault on its own GET."""
        p, n = self.profile, self._extracts
        self._extracts += 1
        faults = self.stack.sim.faults
        if p.sick_every and n % p.sick_every == p.sick_every // 4:
            answer = p.sick_answers[(n // p.sick_every) % len(p.sick_answers)]
            faults.fail_job(job_id, answer=answer, duration_s=p.sick_for_s)
        elif p.lagging_every and n % p.lagging_every == (3 * p.lagging_every) // 4:
            faults.fail_job(job_id, answer=404, duration_s=p.lagging_for_s)

    def _ledger(self) -> Any:
        import boto3

        from scrape_pipeline.ledger.full import Ledger

        assert self.stack.resources is not None
        return Ledger(self.stack.resources.table, client=boto3.client("dynamodb"), clock=self.clock)

    def _chaos(self, elapsed: float, fired: set[str]) -> None:
        """Switch the timed faults on and off as the run's clock passes them."""
        p = self.profile
        front = self.stack.front
        assert front is not None
        if p.outage:
            front.failing_with = 503 if p.outage[0] <= elapsed < p.outage[1] else None
        for index, (at, event_type) in enumerate(p.rotations):
            name = f"rotate-{index}"
            if name not in fired and elapsed >= at:
                try:
                    self._rotate(event_type)
                except GeonodeError:
                    return  # throttled or failing API: the operator tries again a moment later
                fired.add(name)
        for name, window, status, route in (
            ("throttle", p.throttle, 429, None),
            ("5xx", p.server_errors, 503, None),
            ("post-5xx", p.post_errors, 503, "POST /v1/extract"),
        ):
            if window and name not in fired and elapsed >= window[0]:
                fired.add(name)
                self.stack.sim.faults.burst(duration_s=window[1], status=status, route=route)

    def _rotate(self, event_type: str) -> None:
        from scrape_pipeline_ops.rotation import SecretBundle, rotate_webhook_secret

        stack = self.stack
        assert stack.resources is not None
        rotate_webhook_secret(
            stack.client(),
            stack.webhook_ids[event_type],
            SecretBundle(stack.resources.webhook_secret_arn),
            grace_seconds=self.profile.rotation_grace_s,
            replay_with=stack.handlers["reconciler"].get_reconciler(),
            clock=self.clock,
        )

    # -- measuring from outside ------------------------------------------------------------

    def _rotated_at(self) -> dict[str, list[float]]:
        """When each subscription's secret was rotated, by the simulator's record."""
        subs = (self.stack.sim.subscriptions.find(i) for i in self.stack.webhook_ids.values())
        return {sub.id: list(sub.rotated_at) for sub in subs if sub is not None}

    def _units(self) -> list[tuple[Unit, dict[str, Any]]]:
        out = []
        for job in self.stack.sim.truth_jobs():
            kind = {"extract": "extract", "batch_item": "batch", "crawl_page": "crawl"}[job["kind"]]
            index = None if kind == "extract" else int(job["index"])
            out.append((Unit(kind, job["job_id"], index), job))
        return out

    def _subscribe(self) -> BusRecord:
        """A rule and queue of the run's own on the stack's bus, before any work starts."""
        import boto3

        assert self.stack.resources is not None and self.stack.resources.event_bus
        events, sqs = boto3.client("events"), boto3.client("sqs")
        record = BusRecord(self.stack.resources.event_bus, events=events, sqs=sqs)
        record.open()
        return record

    def _observe(self) -> int:
        """Jobs done so far, by the ledger (cheap; only the progress bar and the stop use it),
        and the events the bus delivered since the last look."""
        self.done_at.update(self._ledger_done())
        assert self.bus is not None
        self.bus.drain()
        units = self._units()
        return sum(1 for unit, _ in units if unit.job_id in self.done_at)

    def _ledger_done(self) -> dict[str, float]:
        """Job ids (extract, batch, crawl) the ledger has DONE, with when."""
        from scrape_pipeline.events.detail import DETAIL_TYPES
        from scrape_pipeline.jobs import JobKey, JobKind

        kinds = {"extract": JobKind.EXTRACT, "batch": JobKind.BATCH, "crawl": JobKind.CRAWL}
        keys = list(
            dict.fromkeys(
                JobKey(kinds[unit.kind], unit.job_id)
                for unit, _ in self._units()
                if unit.job_id not in self.done_at
            )
        )
        done: dict[str, float] = {}
        ledger = self._ledger()
        for start in range(0, len(keys), 100):
            for key, row in ledger.get_many(keys[start : start + 100]).items():
                if row.is_done:
                    done[key.job_id] = row.finished_at or self.clock.time()
                    if row.outcome in DETAIL_TYPES:
                        self.owed[(key.kind.value, key.job_id)] = done[key.job_id]
        return done

    def _finished(self) -> bool:
        """Every settled job has its one outcome (by the ledger; S3 judges at the end)."""
        for unit, job in self._units():
            if job["status"] in ("queued", "processing"):
                return False
            if job["status"] == "cancelled" or unit.job_id in self.done_at:
                continue
            return False
        assert self.bus is not None
        return all(job in self.bus.jobs for job in self.owed) and self._runs_told()

    def _runs_told(self) -> bool:
        """Every run's Run Completed came, or waiting for one is over (it is judged missing)."""
        assert self.bus is not None
        now = self.clock.time()
        self._quiet_since = now if self._quiet_since is None else self._quiet_since
        told = {arrival.run for arrival in self.bus.runs}
        waited = now - self._quiet_since > RUN_COMPLETED_WAIT_SECONDS
        return waited or all(run.name in told for run in self.runs)

    def _was_resubmitted_row(self, job: Mapping[str, Any]) -> bool:
        """A failed extract job, batch item or crawl page the pipeline answered with a new
        (extract) job for its URL."""
        return (
            job["kind"] in ("extract", *ITEM_KINDS)
            and job["status"] == "failed"
            and bool(job["retryable"])
            and self._resubmitted(job)
        )

    def _resubmitted(self, job: Mapping[str, Any]) -> bool:
        later = [
            j
            for j in self.stack.sim.truth_jobs("extract")
            if j["url"] == job["url"] and j["created_at"] > job["created_at"]
        ]
        return bool(later)

    def _judge_events_and_items(self, report: Report, listing: Listing) -> None:
        """The bus's events by job against the outcomes, and what each retried item became."""
        assert self.bus is not None
        self.bus.drain()
        report.events = figures(
            report.outcomes, self.bus.arrivals, self.wire, pending=self._still_retrying()
        )
        report.item_retries = judge_item_retries(
            self.stack.sim.truth_jobs(),
            listing,
            gets_by_job=self.stack.sim.request_counts()["by_job"],
            bound=ProcessorSettings().max_resubmissions_per_url,
        )

    def _still_retrying(self) -> set[tuple[str, str]]:
        """Batches and crawls with an item whose retry (an extract job of its URL posted after
        it) still runs: a long job may outlast the run, and the outcome comes once it settles."""
        running = [
            (j["url"], j["created_at"])
            for j in self.stack.sim.truth_jobs("extract")
            if j["status"] in UNSETTLED
        ]
        return {
            (unit.kind, unit.job_id)
            for unit, job in self._units()
            if unit.kind != "extract"
            and job["status"] == "failed"
            and any(url == job["url"] and at > job["created_at"] for url, at in running)
        }

    def _measure(self, report: Report) -> None:
        import boto3

        stack = self.stack
        assert stack.resources is not None and stack.schedule is not None
        assert stack.poller is not None
        s3 = boto3.client("s3")
        bucket = stack.resources.bucket

        def reason_of(key: str) -> str | None:
            body = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            reason = body.get("reason")
            return None if reason is None else str(reason)

        listing = read_listing(s3, bucket)
        judge(
            self._units(),
            listing,
            is_poison=stack.sim.faults.is_malformed,
            resubmitted=self._was_resubmitted_row,
            reason_of=reason_of,
            into=report,
        )
        self._judge_events_and_items(report, listing)
        # A batch or crawl settles with its last item: its ledger row is DONE only then, so an
        # item's latency runs from there (a long item would otherwise age its quick siblings).
        job_settled: dict[str, float] = {}
        for unit, job in self._units():
            settled = float(job["settled_at"])
            job_settled[unit.job_id] = max(job_settled.get(unit.job_id, settled), settled)
        attempts = stack.sim.delivery_attempts()
        # A job whose every event was dropped (one per subscription of its type) reached the
        # pipeline through the reconciler alone.
        events: dict[str, list[bool]] = {}
        for event in stack.sim.webhook_events():
            events.setdefault(event["job_id"], []).append(bool(event["dropped"]))
        latencies, dropped = [], []
        sick = stack.sim.faults.sick_jobs()
        for unit, _ in report.stored_units:
            finished = self.done_at.get(unit.job_id)
            if finished is not None and unit.job_id in sick:
                # Its clock starts when its GET answers again, not when it settled.
                recovered = max(job_settled[unit.job_id], sick[unit.job_id].until)
                report.sick_stored += 1
                report.sick_latency_max = max(report.sick_latency_max, finished - recovered)
            elif finished is not None:
                latencies.append(finished - job_settled[unit.job_id])
                if all(events.get(unit.job_id, [False])):
                    dropped.append(latencies[-1])
        accepted: Counter[tuple[str, str]] = Counter(
            (a["event_type"], a["job_id"])
            for a in attempts
            if a["http_status"] is not None and 200 <= int(a["http_status"]) < 300
        )
        report.duplicates_suppressed = sum(n - 1 for n in accepted.values() if n > 1)
        stored_units = [
            (unit.result_key.rsplit("/", 1)[0], dict(job)) for unit, job in report.stored_units
        ]
        report.large = measure(s3, bucket, stored_units, attempts)
        self._refusals(report, attempts)
        for run in stack.schedule.runs:
            report.recovered.update({k: v for k, v in run["recovered"].items() if v})
        report.latencies = latencies
        report.latency_p50 = percentile(latencies, 50)
        report.latency_p99 = percentile(latencies, 99)
        report.latency_max = max(latencies, default=0.0)
        report.dropped_stored = len(dropped)
        report.dropped_latency_p50 = percentile(dropped, 50)
        report.dropped_latency_p99 = percentile(dropped, 99)
        routes = stack.sim.request_counts()["by_route"]
        reads = sum(n for route, n in routes.items() if not route.startswith("POST "))
        report.requests_per_job = reads / max(1, report.settled)
        report.list_pages = int(routes.get("GET /v1/extract/jobs", 0))
        self._calls(report)
        self._sick_reads(report, sick)
        self._closed_early(report, job_settled)

    def _audit(self, report: Report) -> None:
        """``scrape-pipeline audit``'s own code over the run's window, compared with the judge.

        No grace: the run ended once every settled unit had its outcome (or past its bound),
        so a settled job with nothing in the bucket is missing, as the judge says lost.
        """
        import boto3

        stack = self.stack
        assert stack.resources is not None
        now = self.clock.time()
        # The API gives times to the second: a second's slack before the first submission.
        window = Window(self.started_at - 1.0, now, now, grace_s=0.0)
        wall = time.perf_counter()
        known = of_window(window.since, window.until, ledger=self._ledger())
        client = stack.client()
        lists, pages = self._listing_calls()
        report.audit = audit(client, boto3.client("s3"), stack.resources.bucket, window, known)
        report.audit_seconds = time.perf_counter() - wall
        lists_after, pages_after = self._listing_calls()
        report.audit_s3_list_calls = lists_after - lists
        report.audit_list_pages = pages_after - pages
        report.bucket_entries = self._bucket_entries()
        found = compare(report.outcomes, report.rewritten, report.audit)
        report.audit_differences = found.differences
        report.runs = self._audit_runs(report, window)

    def _audit_runs(self, report: Report, window: Window) -> RunChecks:
        """Each run audited as ``scrape-pipeline audit --run NAME`` audits it, then checked
        against the judge, the window audit and the bus (``run_checks``)."""
        import boto3

        from scrape_pipeline_ops.runs.table import TableJournal

        stack, bus = self.stack, self.bus
        assert stack.resources is not None and bus is not None and report.audit is not None
        journal = TableJournal(stack.resources.table, client=boto3.client("dynamodb"))
        client, s3, bucket = stack.client(), self._s3(), stack.resources.bucket
        bus.drain()
        seen = Evidence(
            report.audit, report.outcomes, report.rewritten, self._units(), bus.arrivals, bus.runs
        )
        return check_runs(
            self.runs,
            lambda name: audit_run(
                client, s3, bucket, window, journal=journal, ledger=self._ledger(), name=name
            ),
            seen,
        )

    def _journal_jobs(self) -> set[str]:
        """The job ids the run journal's entries name now, across the demo's runs."""
        import boto3

        from scrape_pipeline_ops.runs.table import TableJournal

        assert self.stack.resources is not None
        journal = TableJournal(self.stack.resources.table, client=boto3.client("dynamodb"))
        entries = (entry for run in self.runs for entry in journal.entries(run.name))
        return {entry.job_id for entry in entries if entry.job_id}

    def _s3(self) -> Any:
        import boto3

        return boto3.client("s3")

    def _listing_calls(self) -> tuple[int, int]:
        """ListObjectVersions calls made outside any function (botocore's record), and the
        job-list pages the simulator answered, so far."""
        routes = self.stack.sim.request_counts()["by_route"]
        lists = self.aws_calls.unattributed[("s3", "ListObjectVersions")]
        return lists, int(routes.get("GET /v1/extract/jobs", 0))

    def _bucket_entries(self) -> int:
        """Versions and delete markers under ``results/`` and ``dead-letters/``."""
        import boto3

        assert self.stack.resources is not None
        pages = boto3.client("s3").get_paginator("list_object_versions")
        return sum(
            len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))
            for prefix in (f"{RESULTS_PREFIX}/", f"{DEAD_LETTER_PREFIX}/")
            for page in pages.paginate(Bucket=self.stack.resources.bucket, Prefix=prefix)
        )

    def _calls(self, report: Report) -> None:
        """What the run cost: invocations, watch listings, AWS calls per settled job."""
        stack = self.stack
        assert stack.schedule is not None and stack.poller is not None
        report.watch_list_pages = [int(r.get("watch_list_pages", 0)) for r in stack.schedule.runs]
        report.watch_listings = sum(int(r.get("watch_listings", 0)) for r in stack.schedule.runs)
        report.poller_batches = stack.poller.batches
        report.poller_timeouts = stack.poller.timeouts
        report.poison_gets_max = self._poison_gets_max()
        calls = sum(self.aws_calls.calls.values())
        report.aws_calls_per_job = calls / max(1, report.settled)

    def _refusals(self, report: Report, attempts: list[dict[str, Any]]) -> None:
        """Deliveries refused 401 though signed with a valid secret, by the simulator's record."""
        rotated_at = self._rotated_at()
        report.rotated = sum(len(times) for times in rotated_at.values())
        found = refusals(attempts, rotated_at, self.profile.rotation_grace_s)
        report.refused_valid, report.refused_retired = len(found.valid), found.retired
        report.refused_examples = found.valid[:MAX_EXAMPLES]
        report.refused_bad_request = sum(1 for a in attempts if a["http_status"] == 400)

    def _sick_reads(self, report: Report, sick: Mapping[str, Any]) -> None:
        """Per sick job, its GETs (the simulator's record) and the hours it was open."""
        sim = self.stack.sim
        by_job = sim.request_counts()["by_job"]
        created = {j["job_id"]: float(j["created_at"]) for j in sim.truth_jobs("extract")}
        for job_id in sick:
            end = self.done_at.get(job_id, self.clock.time())
            hours = (end - created[job_id]) / 3600
            report.sick_reads[job_id] = (by_job.get(job_id, {}).get(JOB_ROUTES[0], 0), hours)

    def _closed_early(self, report: Report, job_settled: Mapping[str, float]) -> None:
        """Batches and crawls whose outcome the ledger recorded before their last item
        settled (a cancelled one closed while its in-flight items still ran)."""
        kinds = {unit.job_id: unit.kind for unit, _ in self._units()}
        poison = self.stack.sim.faults.is_malformed  # dead-lettered early, rightly
        for job_id, finished in self.done_at.items():
            if kinds.get(job_id) in ("extract", None) or poison(job_id):
                continue
            if finished < job_settled.get(job_id, 0.0):
                report.closed_early += 1
                if len(report.closed_early_examples) < MAX_EXAMPLES:
                    report.closed_early_examples.append(f"{kinds.get(job_id)} {job_id}")


def report_table(report: Report, title: str) -> Any:
    """The report's rows as a rich ``Table``: a must-be-zero row red unless it is 0."""
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in report.lines():
        style = (
            "red" if label.isupper() and value != "0" else ("green" if label.isupper() else None)
        )
        table.add_row(label, value, style=style)
    return table


def print_report(report: Report, chaos: str) -> None:
    """The report as a table (rich when available)."""
    title = f"scrape-pipeline demo (chaos: {chaos})"
    try:
        from rich.console import Console
    except ImportError:  # pragma: no cover - rich is the `cli` extra
        print(title)
        for label, value in report.lines():
            print(f"  {label:<42} {value}")
        return
    Console().print(report_table(report, title))
    if report.lost_examples:
        print("lost:", ", ".join(report.lost_examples[:10]))
    if report.twice_examples:
        print("twice:", ", ".join(report.twice_examples[:10]))
    if report.wrongly_examples:
        print("wrongly dead-lettered:", ", ".join(report.wrongly_examples[:10]))
    if report.poison_examples:
        print("poison mishandled:", ", ".join(report.poison_examples[:10]))
    if report.refused_examples:
        print("refused with a valid secret:", ", ".join(report.refused_examples[:10]))
    if report.closed_early_examples:
        print("closed before its items settled:", ", ".join(report.closed_early_examples[:10]))
    if report.audit is not None and report.audit.failures():
        print("audit:", named(report.audit.failures(), shown=10))
    if report.audit_differences:
        print("audit and judge differ:", ", ".join(report.audit_differences[:10]))
    if report.events.without_examples:
        print("outcomes without an event:", ", ".join(report.events.without_examples[:10]))
    if report.runs.examples():
        print("runs:", ", ".join(report.runs.examples()[:10]))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when nothing was lost, processed twice, wrongly dead-lettered, refused or
    closed early, every retryable item retried, the audit found nothing missing or doubled
    and agreed with the judge (each run's too), every outcome's event came on the bus, and
    each run's Run Completed once, after its URLs' outcomes."""
    parser = argparse.ArgumentParser(
        prog="demo", description=__doc__.splitlines()[0] if __doc__ else ""
    )
    parser.add_argument("--jobs", type=int, default=200, help="units of work (default 200)")
    parser.add_argument("--chaos", choices=sorted(PROFILES), default="default")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--function-log",
        metavar="PATH",
        help="where the functions' output goes: their logs and EMF metrics, as Lambda sends "
        "them to CloudWatch Logs (default: a new scrape-pipeline-demo-*.log in the temp folder)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 10:
        parser.error("--jobs must be at least 10")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ScrapePipelineDemo")
    demo = Demo(args.jobs, args.chaos, args.seed)
    # stdout carries the report alone: what the functions print goes to their log.
    with _function_log(args.function_log) as log, functions_write_to(log):
        report = _run_with_progress(demo)
    print_report(report, args.chaos)
    print(f"functions' logs and metrics: {log.name}", file=sys.stderr)
    failed = (
        report.lost
        or report.processed_twice
        or report.wrongly_dead_lettered
        or report.poison_mishandled
        or report.refused_valid
        or report.closed_early
        or report.audit_failed
        or report.events.without_event
        or report.item_retries.mishandled
        or report.runs.failed
        or report.lost_answers.failed
    )
    return 1 if failed else 0


def _function_log(path: str | None) -> TextIO:
    """The file the functions' output goes to: ``path``, or a new one in the temp folder."""
    if path is None:
        handle, path = tempfile.mkstemp(prefix="scrape-pipeline-demo-", suffix=".log")
        os.close(handle)
    return Path(path).open("w", encoding="utf-8")


def _run_with_progress(demo: Demo) -> Report:
    try:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:  # pragma: no cover
        return demo.run()
    from rich.console import Console

    with Progress(
        TextColumn("[bold]pipeline"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("outcomes stored"),
        TimeElapsedColumn(),
        transient=False,
        console=Console(file=sys.__stderr__),
        disable=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("run", total=demo.jobs)
        return demo.run(lambda done, total: progress.update(task, completed=done, total=total))


if __name__ == "__main__":
    raise SystemExit(main())
