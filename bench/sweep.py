"""Sweep benchmark: Geonode requests per job against the number of concurrent jobs.

python -m bench.sweep [--quick] [--time-scale 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.cadence import Cadence
from bench.pipeline import SETTLE_SECONDS
from bench.report import RESULTS, load_average, markdown_table, save

POLLERS = ("fixed_1s", "seed_backoff", "many_jobs")
SUBMIT_RATE = 40.0  # pipeline submissions per simulated second: under the 50/s rate limit


@dataclass(frozen=True)
class Plan:
    """What one sweep runs."""

    job_counts: tuple[int, ...] = (10, 50, 200)
    time_scale: float = 2.0
    min_duration: float = 1.0
    max_duration: float = 20.0
    seed: int = 1
    workers: int = 2
    quick: bool = False


FULL = Plan()
QUICK = Plan(job_counts=(3, 6), time_scale=8.0, max_duration=4.0, quick=True)


def run_pollers(plan: Plan, log: Callable[[str], None]) -> dict[int, dict[str, Any]]:
    """Per job count: each poller's Geonode GETs per job, one poller at a time."""
    from bench.polling import reads, run_strategy, simulator

    out: dict[int, dict[str, Any]] = {}
    for jobs in plan.job_counts:
        missed: dict[str, int] = {}
        with simulator(argparse.Namespace(**asdict(plan))) as (base_url, clock):
            for name in POLLERS:
                started = time.perf_counter()
                result = run_strategy(name, base_url, clock, jobs, plan.seed)
                missed[name] = jobs - len(result["noticed"])
                log(f"  {name} × {jobs}: {time.perf_counter() - started:.1f} s")
            made = reads(base_url)
        figures: dict[str, Any] = {}
        for name in POLLERS:
            count = made.get(name, 0)
            figures[name] = {
                "reads": count,
                "requests_per_job": count / jobs,
                "missed": missed[name],
            }
        out[jobs] = figures
    return out


def quiet_worker() -> None:
    """The handlers' log and metric lines would bury the report's own output (Powertools prints
    a metrics blob when 100 accumulate, metrics disabled or not)."""
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ScrapePipelineBench")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "bench")
    os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"
    warnings.simplefilter("ignore")
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - this worker's stdout, for its life


def pipeline_task(jobs: int, seed: int) -> dict[str, Any]:
    """``run_pipeline`` with N jobs in flight at once, every AWS call counted (in a worker)."""
    quiet_worker()
    from bench.aws_calls import count_by_function
    from bench.pipeline import run_pipeline

    seen: dict[str, Any] = {}

    def started(stack: Any) -> None:
        seen.update(stack=stack, calls=count_by_function(stack))

    result = run_pipeline(jobs, jobs / SUBMIT_RATE, seed, on_start=started)
    stack = seen["stack"]
    attempts = [a for a in stack.sim.delivery_attempts() if a["http_status"] is not None]
    accepted = Counter(
        (a["event_type"], a["job_id"]) for a in attempts if 200 <= int(a["http_status"]) < 300
    )
    counts = stack.sim.request_counts()
    return {
        **result,
        "deliveries": len(attempts),
        "duplicate_deliveries": sum(n - 1 for n in accepted.values() if n > 1),
        "processor_batches": stack.poller.batches,
        "aws_calls": {who: calls.figures() for who, calls in seen["calls"].items()},
        "statuses": counts["by_status"],
    }


def run_pipelines(plan: Plan, log: Callable[[str], None]) -> dict[int, dict[str, Any]]:
    """The pipeline at each job count, largest first, in worker processes."""
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no forked threads
    with ProcessPoolExecutor(max_workers=plan.workers, mp_context=context) as pool:
        futures = {
            jobs: pool.submit(pipeline_task, jobs, plan.seed)
            for jobs in sorted(plan.job_counts, reverse=True)
        }
        for jobs, future in futures.items():
            log(f"  pipeline × {jobs}: {future.result()['wall_seconds']:.0f} s")
    return {jobs: futures[jobs].result() for jobs in plan.job_counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small job counts (tests)")
    parser.add_argument("--time-scale", type=float, help="pollers' speed-up (default 2, quick 8)")
    parser.add_argument("--workers", type=int, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where sweep.json goes")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.time_scale is not None:
        plan = replace(plan, time_scale=args.time_scale)
    if args.workers is not None:
        plan = replace(plan, workers=max(1, args.workers))
    started = time.perf_counter()
    load_start = load_average()
    cadence = Cadence.from_template()  # what the pipeline runs use (StackSettings' defaults)
    print(f"pollers at {plan.job_counts} jobs, time scale {plan.time_scale:g}")
    polling = run_pollers(plan, print)
    print(f"pipeline at {plan.job_counts} jobs")
    pipelines = run_pipelines(plan, print)
    rows = [
        [name, *(f"{polling[n][name]['requests_per_job']:.3f}" for n in plan.job_counts)]
        for name in POLLERS
    ]
    rows.append(
        ["webhook", *(f"{pipelines[n]['requests_per_settled_job']:.3f}" for n in plan.job_counts)]
    )
    table = markdown_table(["mode", *(f"{n} jobs" for n in plan.job_counts)], rows)
    print(table)
    figures = {
        "plan": asdict(plan),
        "polling": polling,
        "pipelines": pipelines,
        "settle_seconds": SETTLE_SECONDS,
        "reconciler": cadence.as_dict(),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    save("sweep", figures, table, load_start=load_start, directory=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
