"""One point of the scale benchmark (jobs settling at a rate, a share of webhooks dropped), and
what it measures from outside the pipeline: lag, calls, boundedness."""

from __future__ import annotations

import heapq
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench import scale_world
from bench.report import percentile
from bench.scale_world import API_KEY, TemplateReconciler, World, start_world
from scrape_pipeline.jobs import JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator.seeding import rng_for

# Rounds of "deliver, then process" per step: a processed batch can make more work due.
SETTLE_ROUNDS = 20
DRAIN_TIMEOUT_SECONDS = 30.0
PERCENTILES = (50, 99)


@dataclass(frozen=True)
class Point:
    """Settled jobs per simulated second, and the share of their webhooks dropped."""

    rate: float
    drop: float


@dataclass(frozen=True)
class Timing:
    """How long a point runs on the simulated clock."""

    runs: int  # scheduled reconciler runs in the period
    step: float  # seconds the clock moves per step
    # After the period, with no new jobs, runs go on until every settled job is in the
    # pipeline (the dropped jobs' latencies complete), for at most this many runs.
    tail_runs: int
    real_rate_max: float  # above this rate, the stand-ins


def run_point(
    point: Point,
    template: TemplateReconciler,
    timing: Timing,
    *,
    seed: int,
    overrides: dict[str, str] | None = None,
    reconcile: bool = True,
) -> dict[str, Any]:
    """Run one point and return its figures (JSON-ready)."""
    clock = ManualClock(start=time.time())
    real = point.rate <= timing.real_rate_max
    standin_ledger: list[Any] = []

    def standin_processor(event: dict[str, Any], context: Any) -> Any:
        return scale_world.processor(standin_ledger[0])(event, context)

    world = start_world(
        clock,
        template,
        seed=seed,
        webhooks=real,
        overrides=overrides,
        processor=None if real else standin_processor,
    )
    try:
        standin_ledger.append(world.pipeline_ledger)
        if real:
            world.stack.sim.faults.update(drop_rate=point.drop)
        return _drive(world, point, timing, clock, seed=seed, real=real, reconcile=reconcile)
    finally:
        world.stop()


def _drive(
    world: World,
    point: Point,
    timing: Timing,
    clock: ManualClock,
    *,
    seed: int,
    real: bool,
    reconcile: bool,
) -> dict[str, Any]:
    interval = world.template.interval
    origin = clock.time()
    period = timing.runs * interval
    # The tail completes the dropped jobs' latencies: only where the real processor runs.
    end = period + (timing.tail_runs * interval if real else 0.0)
    tracker = LagTracker(world.probe_ledger)
    settle_at: dict[JobKey, float] = {}
    arrivals: list[tuple[float, str]] = []  # stand-in webhooks: a heap of (settle time, id)
    spent: defaultdict[str, float] = defaultdict(float)  # wall seconds by activity
    runs: list[dict[str, Any]] = []
    reconciler_routes: Counter[str] = Counter()
    next_run = origin + interval
    carry = 0.0
    started = time.perf_counter()
    baseline = world.geonode_requests()  # the stack's own set-up (subscriptions)
    caught_up = False
    while clock.time() - origin <= end and not caught_up:
        now = clock.time()
        if now - origin < period:
            carry += point.rate * timing.step
            count, carry = int(carry), carry - int(carry)
            with _timed(spent, "creating jobs"):
                for key, at in _create_jobs(world, count, seed=seed, first=len(settle_at)):
                    settle_at[key] = at
                    tracker.add(key, at)
                    if not real and not _dropped(seed, key, point.drop):
                        heapq.heappush(arrivals, (at, key.job_id))
        with _timed(spent, "receiving and processing"):
            if real:
                _settle(world)
            else:
                _arrive(world, arrivals, now)
                world.poller.drain()
        if now >= next_run:
            next_run += interval
            run = _run(
                world, tracker, now, reconcile=reconcile, routes=reconciler_routes, consume=not real
            )
            spent["reconciler runs"] += run.pop("wall")
            spent["measuring lag"] += run.pop("measuring")
            runs.append({"at": round(now - origin, 1), "in_period": now - origin <= period, **run})
            with _timed(spent, "receiving and processing"):
                if real:
                    _settle(world)
            caught_up = now - origin > period and run["lag"] == 0.0
        clock.advance(timing.step)
    if real:
        # A partial batch waits out the event source's batching window on the clock: let it
        # pass, so that the last run's recoveries are processed before the figures are read.
        clock.advance(world.poller.batching_window_seconds)
        _settle(world)
    wall = time.perf_counter() - started
    observed = _Observed(settle_at, runs, reconciler_routes, baseline, spent)
    return _figures(world, point, observed, interval=interval, wall=wall, real=real)


def _run(
    world: World,
    tracker: LagTracker,
    now: float,
    *,
    reconcile: bool,
    routes: Counter[str],
    consume: bool,
) -> dict[str, Any]:
    """One scheduled run (unless ``reconcile`` is off), then the lag measured right after it."""
    started = time.perf_counter()
    seconds, recovered, complete, errors = 0.0, 0, True, {}
    if reconcile:
        before = world.geonode_requests()
        report, seconds = world.run_reconciler(consume=consume)
        routes.update(world.geonode_requests() - before)
        recovered, complete, errors = report.total_recovered, report.complete, report.errors
    measuring = time.perf_counter()
    lag = tracker.lag(now)
    return {
        "lag": round(lag, 1),
        "waiting": tracker.waiting,
        "seconds": round(seconds, 3),
        "recovered": recovered,
        "complete": complete,
        "errors": errors,
        "wall": measuring - started,
        "measuring": time.perf_counter() - measuring,
    }


def _create_jobs(world: World, count: int, *, seed: int, first: int) -> list[tuple[JobKey, float]]:
    """``count`` async extract jobs, created in the simulator's store (setup, not counted)."""
    sim = world.stack.sim
    created = []
    for i in range(first, first + count):
        job = sim.submit_extract(API_KEY, f"https://scale.example/{seed}/{i}", ("markdown",))
        created.append((JobKey(JobKind.EXTRACT, job.job_id), job.work.settle_at))
    return created


def _dropped(seed: int, key: JobKey, share: float) -> bool:
    """The stand-in's webhook draw, seeded per job as the simulator draws per event."""
    return rng_for(seed, "scale-drop", key.job_id).random() < share


def _arrive(world: World, arrivals: list[tuple[float, str]], now: float) -> None:
    """Take in the stand-in webhooks due by ``now`` (popped off the ``arrivals`` heap)."""
    due = []
    while arrivals and arrivals[0][0] <= now:
        due.append(JobKey(JobKind.EXTRACT, heapq.heappop(arrivals)[1]))
    scale_world.receive(world.pipeline_ledger, due)


@contextmanager
def _timed(spent: defaultdict[str, float], activity: str) -> Iterator[None]:
    """Add the block's wall seconds to ``spent[activity]``."""
    started = time.perf_counter()
    try:
        yield
    finally:
        spent[activity] += time.perf_counter() - started


def _settle(world: World) -> None:
    """Deliver every webhook due now and process the queue until nothing is left to do."""
    for _ in range(SETTLE_ROUNDS):
        world.stack.sim.drain(timeout=DRAIN_TIMEOUT_SECONDS)
        if not world.poller.drain():
            return


def _dropped_latencies(
    world: World, settle_at: dict[JobKey, float], real: bool
) -> tuple[list[float], int, int]:
    """Settle-to-stored seconds of the jobs whose webhook was dropped: values, dropped, missing."""
    if not real:
        return [], 0, 0
    dropped = [
        JobKey(JobKind.EXTRACT, event["job_id"])
        for event in world.stack.sim.webhook_events()
        if event["dropped"] and event["event_type"] == "extract_completed"
    ]
    latencies: list[float] = []
    missing = 0
    for start in range(0, len(dropped), 100):
        chunk = dropped[start : start + 100]
        rows = world.probe_ledger.get_many(chunk)
        for key in chunk:
            row = rows.get(key)
            if row is None or row.outcome is not Outcome.STORED or row.finished_at is None:
                missing += 1
                continue
            latencies.append(row.finished_at - settle_at[key])
    return latencies, len(dropped), missing


@dataclass(frozen=True)
class _Observed:
    """What a point's loop saw."""

    settle_at: dict[JobKey, float]  # every job created, and when the simulator settles it
    runs: list[dict[str, Any]]
    reconciler_routes: Counter[str]  # the reconciler's Geonode requests, by route
    baseline: Counter[str]  # Geonode requests of the stack's set-up, not counted
    spent: defaultdict[str, float]  # wall seconds by activity


def _figures(
    world: World, point: Point, observed: _Observed, *, interval: float, wall: float, real: bool
) -> dict[str, Any]:
    settle_at, runs = observed.settle_at, observed.runs
    reconciler_routes, baseline = observed.reconciler_routes, observed.baseline
    jobs = len(settle_at)
    in_period = [run for run in runs if run["in_period"]]
    lags = [run["lag"] for run in in_period]
    seconds = [run["seconds"] for run in runs]
    pipeline_routes = world.geonode_requests() - baseline - reconciler_routes
    latencies, dropped, missing = _dropped_latencies(world, settle_at, real)
    calls = {who: dict(counts.counts) for who, counts in world.counted.items()}
    return {
        "rate": point.rate,
        "drop": point.drop,
        "jobs": jobs,
        "processing": "real receiver and processor" if real else "ledger stand-ins",
        "runs": len(in_period),
        "tail_runs": len(runs) - len(in_period),
        "lag": lags,
        "lag_at": [run["at"] for run in in_period],
        "lag_max": max(lags, default=0.0),
        "lag_final": lags[-1] if lags else 0.0,
        "bounded": bounded(lags, interval),
        "run_seconds": seconds,
        "run_seconds_p50": round(percentile(seconds, 50), 3) if seconds else None,
        "run_seconds_max": max(seconds, default=0.0),
        "runs_incomplete": sum(not run["complete"] for run in runs),
        "run_errors": [run["errors"] for run in runs if run["errors"]],
        "recovered": sum(run["recovered"] for run in runs),
        "geonode_per_1000": {
            "reconciler": per_thousand(reconciler_routes, jobs),
            "pipeline": per_thousand(pipeline_routes, jobs),
        },
        "aws_per_1000": {who: per_thousand(c, jobs) for who, c in calls.items()},
        "aws_calls": calls,
        "dropped_jobs": dropped,
        "dropped_not_stored": missing,
        "settle_to_stored": (
            {f"p{q}": round(percentile(latencies, q), 1) for q in PERCENTILES}
            if latencies
            else None
        ),
        "wall_seconds": round(wall, 1),
        "wall_seconds_by_activity": {k: round(v, 1) for k, v in observed.spent.items()},
    }


# BatchGetItem's limit: the tracker reads the ledger this many keys at a time.
KEYS_PER_READ = 100
# A job counts as handed to the pipeline once its row is in any of these states (a RECEIVED
# row is the receiver's: its message went out with it).
IN_PIPELINE = {JobState.RECEIVED, JobState.ENQUEUED, JobState.PROCESSING, JobState.DONE}


@dataclass(order=True)
class _Job:
    settle_at: float
    key: JobKey = field(compare=False)


class LagTracker:
    """The age of the oldest settled job the pipeline has not taken in yet."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._unsettled: list[_Job] = []
        self._settled: list[_Job] = []  # in settle order: the walk's track
        self._next = 0  # the first settled job not yet seen in the pipeline

    def add(self, key: JobKey, settle_at: float) -> None:
        """A job the simulator will settle at ``settle_at``."""
        heapq.heappush(self._unsettled, _Job(settle_at, key))

    def lag(self, now: float) -> float:
        """Seconds since the oldest job settled by ``now`` and not in the pipeline settled."""
        while self._unsettled and self._unsettled[0].settle_at <= now:
            self._settled.append(heapq.heappop(self._unsettled))
        while self._next < len(self._settled):
            chunk = self._settled[self._next : self._next + KEYS_PER_READ]
            rows = self._ledger.get_many([job.key for job in chunk])
            for job in chunk:
                row = rows.get(job.key)
                if row is None or row.state not in IN_PIPELINE:
                    return now - job.settle_at
                self._next += 1
        return 0.0

    @property
    def waiting(self) -> int:
        """Settled jobs from the oldest missing one on (an upper bound of the backlog)."""
        return len(self._settled) - self._next


# How much the lag may move over the period's second half and still count as not growing:
# runs land anywhere within a job's last interval, so a lag jitters by up to one interval.
JITTER_SHARE = 0.5  # of an interval: last quarter's peak over the second quarter's
GROWTH_SHARE = 0.25  # of an interval: the fitted line's rise across the second half
MIN_JUDGED_RUNS = 4  # fewer runs have no second half worth a trend
BOUNDED_RULE = (
    "over the runs of the period's second half, the lag's least-squares line rises by"
    f" at most {GROWTH_SHARE:g} of a schedule interval end to end, and the highest lag of the"
    f" last quarter of runs is at most {JITTER_SHARE:g} of an interval above the second"
    " quarter's highest"
)


def bounded(lags: Sequence[float], interval: float) -> bool | None:
    """True when the lag did not grow over the period's second half (``BOUNDED_RULE``);
    None with fewer than ``MIN_JUDGED_RUNS`` runs."""
    if len(lags) < MIN_JUDGED_RUNS:
        return None
    half = len(lags) // 2
    quarter = max(1, len(lags) // 4)
    second_quarter = lags[half - quarter : half]
    last_quarter = lags[-quarter:]
    if max(last_quarter) > max(second_quarter) + JITTER_SHARE * interval:
        return False
    tail = list(lags[half:])
    return _slope(tail) * (len(tail) - 1) <= GROWTH_SHARE * interval


def _slope(values: Sequence[float]) -> float:
    """Least-squares slope of ``values`` against their index."""
    if len(values) < 2:
        return 0.0
    xs = range(len(values))
    x_mean = statistics.fmean(xs)
    y_mean = statistics.fmean(values)
    num = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, values, strict=True))
    den = sum((x - x_mean) ** 2 for x in xs)
    return num / den


def per_thousand(counts: Counter[str] | dict[str, int], jobs: int) -> dict[str, float]:
    """Calls per 1,000 jobs, by key, largest first."""
    if jobs == 0:
        return {}
    ordered = sorted(counts.items(), key=lambda item: -item[1])
    return {name: round(n * 1000 / jobs, 2) for name, n in ordered if n}
