"""Polling benchmark: what it costs to learn that N concurrent async jobs settled.

python -m bench.polling [--jobs 200] [--time-scale 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench.report import load_average, markdown_table, percentile, save
from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline_local.clock import ScaledClock
from scrape_pipeline_ops.many_poller import ManyJobsPoller
from scrape_pipeline_ops.polling import PollSchedule, poll_job

STRATEGIES = ("fixed_1s", "seed_backoff", "many_jobs")
TARGET_REQUESTS_PER_JOB = 1.2
TARGET_RATIO_VS_SEED = 4.0


@contextlib.contextmanager
def simulator(args: argparse.Namespace) -> Iterator[tuple[str, ScaledClock]]:
    """The simulator in its own process (pollers and server do not share one GIL): its URL, and
    a client clock that reads its time (it runs ``args.time_scale`` times faster)."""
    command = [sys.executable, "-m", "scrape_pipeline_local.simulator", "--port", "0"]
    command += ["--rate", "0", "--seed", str(args.seed), "--time-scale", str(args.time_scale)]
    command += ["--min-duration", str(args.min_duration), "--max-duration", str(args.max_duration)]
    for name in STRATEGIES:
        command += ["--api-key", name]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise RuntimeError("the simulator did not start")
        before = time.time()
        sim_now = float(httpx.get(f"{base_url}/_sim/health").json()["now"])
        origin = (before + time.time()) / 2
        yield base_url, ScaledClock(args.time_scale, real_origin=origin, sim_origin=sim_now)
    finally:
        process.terminate()
        process.wait(timeout=10)


def reads(base_url: str) -> dict[str, int]:
    """Each poller's (API key's) GETs, as the simulator counted them."""
    routes = httpx.get(f"{base_url}/_sim/truth/requests").json()["by_key_route"]
    return {
        key: sum(n for r, n in by.items() if r.startswith("GET ")) for key, by in routes.items()
    }


def fixed_poller(client: GeonodeClient, job_id: str, clock: Clock) -> float:
    """The mistake the seed article warns about: ask every second."""
    while True:
        with contextlib.suppress(GeonodeError):  # 404 lag, throttling: just ask again
            if client.get_job(job_id).is_terminal:
                return clock.time()
        clock.sleep(1.0)


def run_strategy(name: str, base_url: str, clock: Clock, jobs: int, seed: int) -> dict[str, Any]:
    client = GeonodeClient(name, base_url=base_url, clock=clock, retry=RetryPolicy(deadline=600))
    submitted = [client.submit_extract(f"https://bench.example/{name}/{i}") for i in range(jobs)]
    submitted_at = clock.time()
    noticed: dict[str, float] = {}
    if name == "many_jobs":
        poller = ManyJobsPoller(client, clock=clock, rng=random.Random(seed))
        poller.track_all(submitted)
        for job in poller.run(max_wait=3600):
            noticed[job.job_id] = clock.time()
    else:

        def one(job_id: str) -> tuple[str, float]:
            if name == "fixed_1s":
                return job_id, fixed_poller(client, job_id, clock)
            poll_job(
                client,
                job_id,
                clock=clock,
                submitted_at=submitted_at,
                schedule=PollSchedule(max_wait=3600),
                rng=random.Random(hash((seed, job_id))),
            )
            return job_id, clock.time()

        with ThreadPoolExecutor(jobs) as pool:
            noticed = dict(pool.map(one, [j.job_id for j in submitted]))
    client.close()
    return {"noticed": noticed, "jobs": [j.job_id for j in submitted]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--min-duration", type=float, default=1.0)
    parser.add_argument("--max-duration", type=float, default=20.0)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args(argv)
    load_start = load_average()

    with simulator(args) as (base_url, clock):
        started = time.perf_counter()
        with ThreadPoolExecutor(len(STRATEGIES)) as pool:  # the three pollers at once
            futures = {
                name: pool.submit(run_strategy, name, base_url, clock, args.jobs, args.seed)
                for name in STRATEGIES
            }
        results = {name: future.result() for name, future in futures.items()}
        wall = time.perf_counter() - started
        truth = httpx.get(f"{base_url}/_sim/truth/jobs", params={"kind": "extract"}).json()["items"]
        counts = reads(base_url)

    settled = {j["job_id"]: float(j["settled_at"]) for j in truth}
    figures: dict[str, Any] = {}
    for name in STRATEGIES:
        polling = counts.get(name, 0)
        delays = [results[name]["noticed"][j] - settled[j] for j in results[name]["jobs"]]
        figures[name] = {
            "jobs": len(results[name]["jobs"]),
            "requests": polling,
            "requests_per_job": round(polling / args.jobs, 3),
            "detection_p50_s": round(percentile(delays, 50), 2),
            "detection_p99_s": round(percentile(delays, 99), 2),
            "missed": args.jobs - len(results[name]["noticed"]),
        }
    many, seed_fig = figures["many_jobs"], figures["seed_backoff"]
    ratio = seed_fig["requests_per_job"] / many["requests_per_job"]
    ok = {
        "requests_per_job": many["requests_per_job"] <= TARGET_REQUESTS_PER_JOB,
        "ratio_vs_seed": ratio >= TARGET_RATIO_VS_SEED,
        "p50_not_worse": many["detection_p50_s"] <= seed_fig["detection_p50_s"],
        "p99_not_worse": many["detection_p99_s"] <= seed_fig["detection_p99_s"],
    }
    rows = [
        [
            name,
            f["requests_per_job"],
            f"{seed_fig['requests_per_job'] / f['requests_per_job']:.1f}×",
            f["detection_p50_s"],
            f["detection_p99_s"],
        ]
        for name, f in figures.items()
    ]
    headers = "poller|requests per job|fewer than seed|detection p50 (s)|detection p99 (s)"
    table = markdown_table(headers, rows)
    table += (
        f"\n\n{args.jobs} concurrent async jobs per poller, durations {args.min_duration:g}–"
        f"{args.max_duration:g} s (time scale {args.time_scale:g}), all three at once; "
        f"requests counted by the simulator, submissions excluded. Floor: 1.0."
    )
    print(table)
    print(f"wall time {wall:.1f} s; targets met: {ok}")
    if not args.no_save:
        save(
            "polling",
            {"args": vars(args), "figures": figures, "targets_met": ok},
            table,
            load_start=load_start,
        )
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
