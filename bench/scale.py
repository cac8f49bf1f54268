"""Scale benchmark: does the reconciler keep up when jobs settle fast and webhooks go missing?

python -m bench.scale [--runs 10] [--workers 2] [--rates 1 10 50] [--drops 0 0.2 1]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import (
    RESULTS,
    load_average,
    load_text,
    machine,
    markdown_table,
    put_section,
    pyplot,
)
from bench.scale_point import BOUNDED_RULE
from bench.scale_world import TemplateReconciler

RATES = (1.0, 10.0, 50.0)
DROPS = (0.0, 0.2, 1.0)
MIN_RUNS = 10  # the floor: scheduled runs per point
STEP_SECONDS = 5.0  # the simulated clock's step: deliveries and processing between runs
# The real receiver and processor carry up to this rate; above it, the ledger stand-ins.
REAL_RATE_MAX = 10.0
# After the period, runs go on (no new jobs) until every settled job is in the pipeline, for
# at most the threshold's worth of runs plus this many.
TAIL_EXTRA_RUNS = 3
# Ten runs of a 1-minute schedule. A longer schedule's ten runs are too long to simulate at
# 50 jobs/s (30,000 jobs every 10 minutes): the period is capped here, and the JSON says how
# many runs it held (too few runs leave ``bounded`` unjudged: null).
MAX_PERIOD_SECONDS = 600.0
QUIET_ENV = {"POWERTOOLS_LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_DISABLED": "true"}
TARGETS = {
    "bounded_at_50_per_s": "lag bounded at 50 jobs/s with 20 % and 100 % dropped",
    "p99_at_20_percent": "dropped-webhook settle-to-stored p99 <= 180 s at 20 % dropped",
}
P99_TARGET_SECONDS = 180.0
DEFAULT_OUT = RESULTS / "scale.json"
TEMPLATE = RESULTS.parent / "templates" / "scale.md"  # the RESULTS.md section, figures as fields
CHART = "scale_lag.png"
HEADING = "## Scale: reconciler lag at sustained settle rates"
SMALL_COUNT = 100  # below it, calls per 1,000 jobs keep three significant digits


def plan_timing(interval: float, threshold: float, runs: int) -> tuple[int, int]:
    """(runs in the period, most tail runs) for a schedule of ``interval`` seconds."""
    in_period = max(1, min(runs, math.floor(MAX_PERIOD_SECONDS / interval)))
    return in_period, math.ceil(threshold / interval) + TAIL_EXTRA_RUNS


@dataclass(frozen=True)
class PointTask:
    """What a worker process needs to run one point."""

    rate: float
    drop: float
    runs: int
    tail_runs: int
    seed: int
    schedule: str | None
    overrides: dict[str, str]


def point_task(task: PointTask) -> dict[str, Any]:
    """One point, in a worker process of its own (one local stack per process)."""
    from bench.scale_point import Point, Timing, run_point
    from bench.sweep import quiet_worker

    quiet_worker()
    os.environ.update(QUIET_ENV)

    template = TemplateReconciler.read(task.schedule)
    timing = Timing(
        runs=task.runs, step=STEP_SECONDS, tail_runs=task.tail_runs, real_rate_max=REAL_RATE_MAX
    )
    return run_point(
        Point(task.rate, task.drop), template, timing, seed=task.seed, overrides=task.overrides
    )


def targets(points: Sequence[dict[str, Any]]) -> dict[str, bool | None]:
    """The issue's targets, judged on the points that ran (None: the point did not run)."""
    fast = [p for p in points if p["rate"] == max(RATES) and p["drop"] in (0.2, 1.0)]
    lossy = [p for p in points if p["drop"] == 0.2 and p["settle_to_stored"]]
    verdicts = [p["bounded"] for p in fast]
    return {
        "bounded_at_50_per_s": (
            None if len(fast) != 2 or None in verdicts else all(v is True for v in verdicts)
        ),
        "p99_at_20_percent": (
            all(p["settle_to_stored"]["p99"] <= P99_TARGET_SECONDS for p in lossy)
            if lossy
            else None
        ),
    }


def build_document(
    template: TemplateReconciler,
    overrides: dict[str, str],
    points: list[dict[str, Any]],
    *,
    runs: int,
    tail_runs: int,
    wall: float,
    preview: bool,
    load_start: list[float],
) -> dict[str, Any]:
    """The JSON saved in ``bench/results/scale.json``."""
    return {
        "machine": machine(),
        "load_average": {"start": load_start, "end": load_average()},
        "reconciler": {
            "schedule": template.schedule,
            "interval_seconds": template.interval,
            "timeout_seconds": template.timeout,
            "env": {**template.env, **overrides},
            "from_template": not preview,
        },
        "runs_per_point": runs,
        "max_tail_runs": tail_runs,
        "step_seconds": STEP_SECONDS,
        "real_rate_max": REAL_RATE_MAX,
        "bounded_rule": BOUNDED_RULE,
        "targets": targets(points),
        "target_text": TARGETS,
        "wall_seconds": round(wall, 1),
        "points": points,
    }


def _calls(per_1000: dict[str, float]) -> str:
    total = sum(per_1000.values())
    return f"{total:,.0f}" if total >= SMALL_COUNT else f"{total:.3g}"


def _latency(point: dict[str, Any]) -> str:
    figures = point.get("settle_to_stored")
    if not figures:
        return "n/a"
    return f"{figures['p50']:.0f} / {figures['p99']:.0f}"


def table(document: dict[str, Any]) -> str:
    """One row per point."""
    rows = []
    for p in document["points"]:
        geonode, aws = p["geonode_per_1000"], p["aws_per_1000"]
        rows.append(
            [
                f"{p['rate']:g}",
                f"{p['drop']:.0%}",
                p["jobs"],
                p["runs"],
                f"{p['lag_max']:.0f}",
                f"{p['lag_final']:.0f}",
                {True: "yes", False: "**no**", None: "not judged"}[p["bounded"]],
                f"{p['run_seconds_p50']:.2f} / {p['run_seconds_max']:.2f}",
                p["recovered"],
                f"{_calls(geonode['reconciler'])} / {_calls(geonode['pipeline'])}",
                f"{_calls(aws['reconciler'])} / {_calls(aws['pipeline'])}"
                f" / {_calls(aws['event_source'])}",
                _latency(p),
                "real" if p["processing"].startswith("real") else "stand-in",
            ]
        )
    headers = (
        "jobs/s|dropped|jobs|runs|lag max (s)|lag at last run (s)|bounded|run s p50 / max|"
        "recovered|Geonode calls per 1,000 jobs: reconciler / pipeline|"
        "AWS calls per 1,000 jobs: reconciler / pipeline / event source|"
        "dropped jobs' settle-to-stored p50 / p99 (s)|processing"
    )
    return markdown_table(headers, rows)


def _details(document: dict[str, Any]) -> str:
    """Lag per run and calls by route and operation, per point."""
    lines = []
    for p in document["points"]:
        lags = ", ".join(f"{lag:.0f}" for lag in p["lag"])
        lines.append(f"- **{p['rate']:g}/s, {p['drop']:.0%} dropped**: lag after each run {lags}")
        for who, routes in p["geonode_per_1000"].items():
            if routes:
                text = ", ".join(f"`{r}` {n:g}" for r, n in routes.items())
                lines.append(f"  - Geonode per 1,000 jobs, {who}: {text}")
        for who, calls in p["aws_per_1000"].items():
            if calls:
                text = ", ".join(f"`{c}` {n:g}" for c, n in calls.items())
                lines.append(f"  - AWS per 1,000 jobs, {who}: {text}")
        spent = ", ".join(f"{k} {v:g} s" for k, v in p["wall_seconds_by_activity"].items())
        lines.append(f"  - wall time {p['wall_seconds']:g} s: {spent}")
        if p["runs_incomplete"]:
            lines.append(f"  - runs cut short or with a failed sweep: {p['runs_incomplete']}")
    return "\n".join(lines)


def section(document: dict[str, Any], chart_path: str = f"charts/{CHART}") -> str:
    """The whole RESULTS.md section, between its markers."""
    rec = document["reconciler"]
    env = ", ".join(f"`{k}={v}`" for k, v in sorted(rec["env"].items()) if "RECONCILE" in k)
    origin = (
        "the template's defaults" if rec["from_template"] else "**a preview, not the template**"
    )
    targets = "; ".join(
        f"{document['target_text'][name]}: **{_verdict(met)}**"
        for name, met in document["targets"].items()
    )
    about = document["machine"]
    # A point measured again after the full run, when one was (its note says why).
    rerun = f"\n{document['rerun']}\n" if document.get("rerun") else ""
    return TEMPLATE.read_text().format_map(
        {
            **document,
            "about": about,
            "load": load_text(document["load_average"]),
            "rec": rec,
            "origin": origin,
            "env": env,
            "table": table(document),
            "targets": targets,
            "rerun": rerun,
            "chart_path": chart_path,
            "details": _details(document),
        }
    )


def _verdict(met: bool | None) -> str:
    return "not run" if met is None else ("met" if met else "not met")


def chart(document: dict[str, Any], path: Path) -> None:
    """Lag after each run against simulated minutes, one line per point."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    for p in document["points"]:
        minutes = [at / 60 for at in p["lag_at"]]
        style = "-" if p["processing"].startswith("real") else "--"
        label = f"{p['rate']:g}/s, {p['drop']:.0%} dropped"
        ax.plot(minutes, p["lag"], style, marker="o", markersize=3, label=label)
    ax.set_xlabel("simulated minutes")
    ax.set_ylabel("lag after the run (s)")
    ax.set_title(f"Reconciler lag, schedule {document['reconciler']['schedule']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def from_saved(out_dir: Path, source: Path = DEFAULT_OUT) -> str:
    """The section from the saved JSON, its chart drawn into ``out_dir``; "" when none saved."""
    if not source.exists():
        return ""
    document = json.loads(source.read_text())
    chart(document, out_dir / "charts" / CHART)
    return section(document)


def save(document: dict[str, Any], out: str | Path, results_md: Path) -> None:
    """Write the JSON, the chart next to RESULTS.md, and the section into RESULTS.md."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    chart(document, results_md.parent / "charts" / CHART)
    put_section(results_md, "scale", section(document))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=MIN_RUNS, help="scheduled runs per point")
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES))
    parser.add_argument("--drops", type=float, nargs="+", default=list(DROPS))
    parser.add_argument("--workers", type=int, default=2, help="points run side by side")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schedule", help="preview: a rate(...) instead of the template's")
    parser.add_argument(
        "--env", action="append", default=[], help="preview: NAME=VALUE for the reconciler"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    os.environ.update(QUIET_ENV)
    from scrape_pipeline.reconciler.settings import ReconcilerSettings

    overrides = dict(item.split("=", 1) for item in args.env)
    template = TemplateReconciler.read(args.schedule)
    settings = ReconcilerSettings.from_env({**template.env, **overrides})
    runs, tail_runs = plan_timing(template.interval, settings.job_list.threshold_seconds, args.runs)
    grid = [(rate, drop) for rate in args.rates for drop in args.drops]
    # The longest points first, so two workers finish together.
    grid.sort(key=lambda point: -point[0] * (1 + point[1]))
    print(
        f"{len(grid)} points, {runs} runs of {template.schedule} each "
        f"(threshold {settings.job_list.threshold_seconds:g} s, timeout {template.timeout:g} s), "
        f"{args.workers} workers"
    )
    started = time.perf_counter()
    load_start = load_average()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=context) as pool:
        futures = {
            point: pool.submit(
                point_task,
                PointTask(*point, runs, tail_runs, args.seed, args.schedule, overrides),
            )
            for point in grid
        }
        points = []
        for (rate, drop), future in futures.items():
            figures = future.result()
            points.append(figures)
            print(
                f"  {rate:g}/s {drop:.0%} dropped: lag max {figures['lag_max']:.0f} s, "
                f"bounded {figures['bounded']}, {figures['wall_seconds']:.0f} s wall"
            )
    points.sort(key=lambda p: (p["rate"], p["drop"]))
    wall = time.perf_counter() - started
    document = build_document(
        template,
        overrides,
        points,
        runs=runs,
        tail_runs=tail_runs,
        wall=wall,
        preview=bool(args.schedule or overrides),
        load_start=load_start,
    )
    print(table(document))
    print(f"targets: {document['targets']}; wall time {wall:.0f} s")
    if not args.no_save:
        out = Path(args.out)
        # Elsewhere than bench/results, the section goes next to the JSON, not into RESULTS.md.
        save(
            document,
            out,
            RESULTS.parent / "RESULTS.md" if out == DEFAULT_OUT else out.with_suffix(".md"),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
