"""Latency benchmark: the webhook pipeline's settle-to-stored latency, per stored unit.

python -m bench.latency [--jobs 200] [--seed 7]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.cadence import Cadence
from bench.report import RESULTS, load_average, markdown_table, percentile, save
from bench.sweep import quiet_worker

CHAOS = ("default", "none")
# The demo's report figures kept beside the latencies.
REPORT: tuple[str, ...] = ("settled", "stored", "lost", "processed_twice", "latency_p50")
REPORT += ("duplicates_suppressed", "latency_p99", "requests_per_job", "simulated_seconds")
REPORT += ("wall_seconds",)


def demo_task(jobs: int, chaos: str, seed: int) -> dict[str, Any]:
    """``make demo``'s run; per-unit settle-to-stored latencies from its public data."""
    quiet_worker()
    from scrape_pipeline_local.demo import Demo

    demo = Demo(jobs, chaos, seed)
    report = demo.run()
    # The demo's own figures: one definition of settle-to-stored, wherever it is shown.
    latencies = list(report.latencies)
    return {
        "chaos": chaos,
        "jobs": jobs,
        "latencies": latencies,
        "report": {name: getattr(report, name) for name in REPORT}
        | {"recovered": dict(report.recovered)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200, help="units of each demo run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where latency.json goes")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_start = load_average()
    cadence = Cadence.from_template()  # the demo's stack runs the template's reconciler
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no forked threads
    with ProcessPoolExecutor(max_workers=len(CHAOS), mp_context=context) as pool:
        futures = {chaos: pool.submit(demo_task, args.jobs, chaos, args.seed) for chaos in CHAOS}
        demos = {chaos: future.result() for chaos, future in futures.items()}
    threshold = cadence.threshold_seconds
    rows = [
        [
            chaos,
            len(run["latencies"]),
            *(f"{percentile(run['latencies'], q):.1f}" for q in (50, 99)),
            sum(1 for v in run["latencies"] if v >= threshold),
            ", ".join(f"{n} {k}" for k, n in sorted(run["report"]["recovered"].items()) if n)
            or "0",
        ]
        for chaos, run in demos.items()
    ]
    headers = "chaos|stored units|settle-to-stored p50 (s)|p99 (s)|{}|recovered by the reconciler"
    table = markdown_table(headers.format(f"≥ {threshold:g} s (the reconciler's threshold)"), rows)
    table += (
        f"\n\n`make demo`'s run (`Demo(jobs={args.jobs}, seed={args.seed})`) under each chaos "
        f"profile, the reconciler `{cadence.schedule}`; simulated seconds. The same figures as "
        "in [bench/RESULTS.md](../bench/RESULTS.md)."
    )
    print(table)
    figures = {
        "args": {"jobs": args.jobs, "seed": args.seed},
        "demos": demos,
        "reconciler": cadence.as_dict(),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    save("latency", figures, table, load_start=load_start, directory=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
