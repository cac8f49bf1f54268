"""Pipeline benchmark: Geonode requests per settled job in webhook mode, reconciler included.

1,000 async extract jobs submitted over half an hour of simulated time, on the local stack
(the real handlers, moto, the simulator's default failure rates, no webhook dropped), the
reconciler on the template's schedule and settings (every minute). Requests are counted by
the simulator; submissions and resubmissions (POSTs: the work itself) are excluded, every read
is counted: job fetches, the reconciler's job-list and delivery-log pages, its subscription
listing. In the same run, the same jobs with the reconciler of before (every 10 minutes, a
600 s threshold, a 120 s overlap): what the one-minute cadence adds per job; and the seed
article's backoff poller as in the polling benchmark, for comparison.

    python -m bench.pipeline [--jobs 1000] [--seed-jobs 200]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.report import markdown_table, save

TARGET_REQUESTS_PER_JOB = 1.05
TARGET_ADDED_PER_JOB = 0.02  # what the one-minute reconciler may add over the 10-minute one
SETTLE_SECONDS = 3 * 600 + 60  # after the last submission: three 10-minute runs past it
# The reconciler before the one-minute cadence: the baseline measured in the same run.
TEN_MINUTE_RECONCILER = {
    "RECONCILE_THRESHOLD_SECONDS": "600",
    "RECONCILE_OVERLAP_SECONDS": "120",
}
TEN_MINUTES = 600.0


def run_pipeline(
    jobs: int,
    spread: float,
    seed: int,
    *,
    ten_minute_reconciler: bool = False,
    on_start: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """The pipeline's figures; the template's reconciler unless ``ten_minute_reconciler``.

    ``on_start`` gets the local stack once it runs, before the first job (to count its calls).
    """
    os.environ.update({"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"})
    from scrape_pipeline_local.clock import ManualClock
    from scrape_pipeline_local.simulator import SimConfig
    from scrape_pipeline_local.stack import LocalStack, StackSettings

    clock = ManualClock(start=time.time())
    stack = LocalStack(
        clock,
        SimConfig(seed=seed),  # default durations (1-20 s), failure rates and rate limit
        StackSettings(reconcile_interval=TEN_MINUTES, env=dict(TEN_MINUTE_RECONCILER))
        if ten_minute_reconciler
        else StackSettings(),
    ).start()
    try:
        if on_start is not None:
            on_start(stack)
        client = stack.client()
        interval = spread / jobs
        started = time.perf_counter()
        for i in range(jobs):
            client.submit_extract(f"https://bench.example/pipeline/{i}")
            stack.step(interval)
        # let everything settle, then two more 10-minute reconciler runs past the threshold
        deadline = clock.time() + SETTLE_SECONDS
        while clock.time() < deadline:
            stack.step(5.0)
        wall = time.perf_counter() - started
        truth = stack.sim.truth_jobs("extract")
        settled = [j for j in truth if j["status"] in ("completed", "failed", "cancelled")]
        counts = stack.sim.request_counts()["by_route"]
        reads = {route: n for route, n in counts.items() if not route.startswith("POST ")}
        posts = {route: n for route, n in counts.items() if route.startswith("POST ")}
        assert stack.schedule is not None
        runs = stack.schedule.runs
    finally:
        stack.stop()
    total_reads = sum(reads.values())
    return {
        "jobs_submitted": jobs,
        "settled_jobs": len(settled),
        "resubmissions": len(truth) - jobs,
        "reads": reads,
        "posts": posts,
        "requests_per_settled_job": round(total_reads / len(settled), 4),
        "reconciler_runs": len(runs),
        "recovered": {k: sum(r["recovered"][k] for r in runs) for k in runs[0]["recovered"]},
        "simulated_seconds": round(spread + SETTLE_SECONDS),
        "wall_seconds": round(wall, 1),
    }


def run_seed_poller(jobs: int, time_scale: float, seed: int) -> dict[str, Any]:
    """The polling benchmark's seed poller, alone, in this same run."""
    import httpx

    from bench.polling import aligned_clock, run_strategy, start_simulator

    args = argparse.Namespace(seed=seed, min_duration=1.0, max_duration=20.0, time_scale=time_scale)
    process, base_url = start_simulator(args)
    try:
        clock = aligned_clock(base_url, time_scale)
        result: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: result.update(run_strategy("seed_backoff", base_url, clock, jobs, seed))
        )
        thread.start()
        thread.join()
        routes = httpx.get(f"{base_url}/_sim/truth/requests").json()["by_key_route"]
    finally:
        process.terminate()
        process.wait(timeout=10)
    reads = sum(n for r, n in routes.get("seed_backoff", {}).items() if r.startswith("GET "))
    return {"jobs": jobs, "requests_per_job": round(reads / jobs, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=1800.0, help="simulated submission span")
    parser.add_argument("--seed-jobs", type=int, default=200)
    parser.add_argument("--seed-time-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)

    pipeline = run_pipeline(args.jobs, args.spread, args.seed)
    before = run_pipeline(args.jobs, args.spread, args.seed, ten_minute_reconciler=True)
    seed_poller = run_seed_poller(args.seed_jobs, args.seed_time_scale, args.seed)
    ratio = seed_poller["requests_per_job"] / pipeline["requests_per_settled_job"]
    added = round(pipeline["requests_per_settled_job"] - before["requests_per_settled_job"], 4)
    ok = {
        "requests_per_job": pipeline["requests_per_settled_job"] <= TARGET_REQUESTS_PER_JOB,
        "reconciler_added_per_job": added <= TARGET_ADDED_PER_JOB,
    }
    rows = [
        [
            "webhook pipeline (reconciler every minute included)",
            pipeline["requests_per_settled_job"],
            f"{ratio:.1f}×",
            "≤ 1.05",
        ],
        [
            "same jobs, reconciler every 10 min (before)",
            before["requests_per_settled_job"],
            f"{seed_poller['requests_per_job'] / before['requests_per_settled_job']:.1f}×",
            f"every minute adds {added:+.4f} (≤ +{TARGET_ADDED_PER_JOB})",
        ],
        [
            "seed article's backoff poller (polling benchmark)",
            seed_poller["requests_per_job"],
            "1.0×",
            "baseline",
        ],
    ]
    table = markdown_table(
        ["mode", "Geonode requests per settled job", "fewer than seed", "target"], rows
    )
    table += (
        f"\n\n{pipeline['jobs_submitted']} jobs submitted over {args.spread:.0f} simulated s, "
        f"{pipeline['settled_jobs']} settled ({pipeline['resubmissions']} of them resubmissions of "
        f"retryable failures); reads by route: "
        + ", ".join(f"`{r}` {n}" for r, n in sorted(pipeline["reads"].items()))
        + f"; {pipeline['reconciler_runs']} reconciler runs, recovered {pipeline['recovered']}. "
        f"Every 10 minutes: reads by route "
        + ", ".join(f"`{r}` {n}" for r, n in sorted(before["reads"].items()))
        + f", {before['reconciler_runs']} runs. "
        f"Seed poller: {seed_poller['jobs']} jobs of 1–20 s. Submissions are not counted."
    )
    print(table)
    print(f"wall time {pipeline['wall_seconds']} s; targets met: {ok}")
    if not args.no_save:
        save(
            "pipeline",
            {
                "args": vars(args),
                "pipeline": pipeline,
                "ten_minute_reconciler": before,
                "reconciler_added_per_job": added,
                "seed_poller": seed_poller,
                "targets_met": ok,
            },
            table,
        )
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
