"""The benchmark results as one document: ``bench/RESULTS.md``, its tables and PNG charts.

python -m bench.results_report [--results bench/results] [--out bench]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import cost, scale, submit
from bench.cadence import Cadence, every
from bench.report import BENCH, RESULTS, load_text, markdown_table, percentile, pyplot
from bench.sweep import POLLERS, SUBMIT_RATE

TEMPLATE = BENCH / "templates" / "results.md"  # the prose, with the figures as named fields
MODES = (*POLLERS, "webhook")
LABELS = {
    "fixed_1s": "fixed 1 s poller",
    "seed_backoff": "seed article's backoff poller",
    "many_jobs": "many-jobs poller",
    "webhook": "webhook pipeline",
}
COST_ORDER = ("webhook", "many_jobs", "seed_backoff", "fixed_1s")  # cheapest first
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# -- figures ---------------------------------------------------------------------------------


def requests_table(polling: dict[int, Any], pipelines: dict[int, Any]) -> dict[str, list[float]]:
    """Mode -> requests per job at each job count (ascending)."""
    counts = sorted(polling)
    table = {name: [polling[n][name]["requests_per_job"] for n in counts] for name in POLLERS}
    table["webhook"] = [pipelines[n]["requests_per_settled_job"] for n in counts]
    return table


def latency_figures(latencies: list[float], threshold: float) -> dict[str, float]:
    """Percentiles, and the units past the reconciler's threshold (its path, or a retry's)."""
    return {
        "count": len(latencies),
        "p50": percentile(latencies, 50),
        "p90": percentile(latencies, 90),
        "p99": percentile(latencies, 99),
        "max": max(latencies, default=float("nan")),
        "over_threshold": sum(1 for v in latencies if v >= threshold),
    }


def pipeline_measure(run: dict[str, Any], receiver: dict[str, Any]) -> cost.PipelineMeasure:
    """The cost model's counts from one instrumented pipeline run and receiver.json."""
    reads = run["reads"]
    calls = run["aws_calls"]
    source = {c: n for c, n in calls["event_source"].items() if not c.endswith("(empty)")}
    aws = receiver.get("handler_moto", {}).get("aws_calls", {})
    return cost.PipelineMeasure(
        settled_jobs=run["settled_jobs"],
        job_reads=reads.get("GET /v1/extract/{job_id}", 0),
        deliveries=run["deliveries"],
        duplicate_deliveries=run["duplicate_deliveries"],
        processor_batches=run["processor_batches"],
        processor_calls=calls["processor"],
        event_source_calls=source,
        reconciler_runs=run["reconciler_runs"],
        reconciler_calls=calls["reconciler"],
        reconciler_fixed_reads=reads.get("GET /v1/webhooks", 0)
        + reads.get("GET /v1/webhooks/{webhook_id}/deliveries", 0),
        receiver_calls_new=int(aws.get("new", 2)),
        receiver_calls_duplicate=int(aws.get("duplicate", 1)),
        outcomes=run["settled_jobs"] - run["resubmissions"],
    )


def cost_lines(
    polling: dict[int, Any],
    pipeline_run: dict[str, Any],
    receiver: dict[str, Any],
    assumptions: cost.Assumptions,
) -> dict[str, list[cost.Line]]:
    """Mode -> its cost lines; pollers at the largest job count measured."""
    measure = pipeline_measure(pipeline_run, receiver)
    lines = {"webhook": cost.pipeline_lines(measure, assumptions, mode=LABELS["webhook"])}
    largest = max(polling)
    puts = measure.processor_calls.get("s3:PutObject", 0) / max(1, measure.settled_jobs)
    for name in POLLERS:
        per_job = polling[largest][name]["requests_per_job"]
        lines[name] = cost.poller_lines(
            LABELS[name], per_job, puts, basis=f"measured: {largest} concurrent jobs"
        )
    return lines


# -- charts ----------------------------------------------------------------------------------


def chart_requests(path: Path, counts: list[int], table: dict[str, list[float]]) -> None:
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for mode, marker in zip(MODES, "osd^", strict=True):
        ax.plot(counts, table[mode], marker=marker, label=LABELS[mode])
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="floor: one fetch per job")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel("concurrent jobs")
    ax.set_ylabel("Geonode requests per job (submission excluded)")
    ax.set_title("Requests per job against concurrency")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chart_latency(path: Path, demos: dict[str, Any], threshold: float) -> None:
    plt = pyplot()
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=110)
    values = [v for d in demos.values() for v in d["latencies"] if v > 0]
    low = 10 ** math.floor(math.log10(min(values, default=0.1)))
    high = 10 ** math.ceil(math.log10(max(values, default=10.0)))
    edges = [low * (high / low) ** (i / 40) for i in range(41)]
    for chaos, demo in demos.items():
        data = [max(v, low) for v in demo["latencies"]]
        label = f"chaos {chaos} ({len(data)} units)"
        hist.hist(data, bins=edges, alpha=0.6, label=label)
        ordered = sorted(data)
        shares = [(i + 1) / len(ordered) for i in range(len(ordered))]
        cdf.step(ordered, shares, where="post", label=label)
    for ax in (hist, cdf):
        ax.set_xscale("log")
        ax.axvline(threshold, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("settle-to-stored latency (s, log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    hist.set_ylabel("stored units")
    hist.set_title("Histogram")
    cdf.set_ylabel("share of stored units")
    cdf.set_ylim(0, 1.01)
    cdf.set_title(f"CDF (dashed: the reconciler's {threshold:g} s threshold, template.yaml)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chart_cost(path: Path, lines: dict[str, list[cost.Line]]) -> None:
    plt = pyplot()
    modes = COST_ORDER
    names = [LABELS[m] for m in modes]
    submit = [sum(x.per_million for x in lines[m] if x.item == "submission POST") for m in modes]
    geonode = [
        cost.by_category(lines[m])["geonode"] - s for m, s in zip(modes, submit, strict=True)
    ]
    aws = [cost.by_category(lines[m])["aws"] for m in modes]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.bar(names, submit, label="Geonode: submissions")
    ax.bar(names, geonode, bottom=submit, label="Geonode: polls, fetches, reconciler reads")
    tops = [s + g for s, g in zip(submit, geonode, strict=True)]
    ax.bar(names, aws, bottom=tops, label="AWS (API Gateway, Lambda, DynamoDB, SQS, S3, ...)")
    for i, mode in enumerate(modes):
        ax.annotate(
            f"${cost.total(lines[mode]):,.0f}",
            (i, tops[i] + aws[i]),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    ax.set_ylabel("US dollars per million jobs")
    ax.set_title("Cost per million jobs (list prices, see RESULTS.md)")
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8)
    ax.margins(y=0.12)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -- the document ----------------------------------------------------------------------------


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.01 else f"${value:.4f}"


def _sources_table(sources: dict[str, dict[str, Any]]) -> str:
    """Each results file drawn here: when, on what and under which load it was measured."""
    rows = []
    for name, doc in sources.items():
        about = doc["machine"]
        load = load_text(doc["load_average"]).removeprefix("load average ")
        cpus = f"{about['cpus']} CPUs ({about['cpu_model']})"
        rows.append(
            [f"`bench/results/{name}.json`", f"{about['date']} {about['time']}", cpus, load]
        )
    return markdown_table("results|measured (UTC)|machine|load average (1 min)", rows)


def _latency_rows(demos: dict[str, Any], threshold: float) -> tuple[list[list[Any]], list[str]]:
    """The latency table's rows, and each demo's check against its own percentiles."""
    rows, checks = [], []
    for chaos, demo in demos.items():
        f = latency_figures(demo["latencies"], threshold)
        r = demo["report"]
        recovered = ", ".join(f"{n} {k}" for k, n in sorted(r["recovered"].items()) if n) or "0"
        lost = f"{r['lost']} / {r['processed_twice']}"
        percentiles = [_fmt(f[q]) for q in ("p50", "p90", "p99", "max")]
        rows.append([chaos, f["count"], *percentiles, f["over_threshold"], recovered, lost])
        same = math.isclose(f["p50"], r["latency_p50"]) and math.isclose(f["p99"], r["latency_p99"])
        checks.append(
            f"{chaos}: {'same as' if same else 'differs from'} the demo's own p50 / p99 "
            f"({r['latency_p50']:.1f} s / {r['latency_p99']:.1f} s)"
        )
    return rows, checks


def _events_section(pipeline: dict[str, Any], big: dict[str, Any]) -> str:
    """The outcome events of ``make bench-pipeline``, and PutEvents in the sweep's burst."""
    from bench.pipeline import events_table

    run = pipeline["pipeline"]
    cadence = Cadence.from_saved(pipeline["reconciler"])
    table = events_table(run["events"], cadence, pipeline["event_linger"]["events"])
    calls = big["aws_calls"]["processor"]["events:PutEvents"]
    outcomes = big["settled_jobs"] - big["resubmissions"]
    return (
        (BENCH / "templates" / "events.md")
        .read_text()
        .format(
            run=run,
            spread=pipeline["args"]["spread"],
            events_table=table,
            big=big,
            submit_rate=SUBMIT_RATE,
            calls=calls,
            outcomes=outcomes,
            per_outcome=calls / max(1, outcomes),
        )
    )


def _line_row(x: cost.Line) -> list[str]:
    per_job, price, per_million = (
        f"{x.per_job:.4g}",
        cost.price_text(x.unit_price),
        _money(x.per_million),
    )
    return [x.mode, x.component, x.item, per_job, x.unit, price, per_million, x.basis]


def _cost_fields(lines: dict[str, list[cost.Line]]) -> dict[str, Any]:
    """The cost section's tables and ratios."""
    totals = {mode: cost.total(lines[mode]) for mode in COST_ORDER}
    rows = []
    for mode in COST_ORDER:
        cats = cost.by_category(lines[mode])
        requests = sum(x.per_job for x in lines[mode] if x.component == "Geonode")
        ratio = f"{totals[mode] / totals['seed_backoff']:.2f}×"
        money = [_money(cats["geonode"]), _money(cats["aws"]), _money(totals[mode])]
        rows.append([LABELS[mode], _fmt(requests), *money, ratio])
    detail = [_line_row(x) for mode in COST_ORDER for x in lines[mode]]
    many_ratio = totals["many_jobs"] / totals["webhook"]
    close = (
        ": on cost the pipeline and the many-jobs poller are within the model's margin, and the "
        "choice between them rests on the rest (a public endpoint for the webhooks, a process "
        "that keeps running for the poller)."
    )
    return {
        "cost_table": markdown_table(
            "mode|Geonode requests per job (submission included)|Geonode|AWS|total|vs seed poller",
            rows,
        ),
        "lines_table": markdown_table(
            "mode|component|item|per job|unit|unit price|per million jobs|basis", detail
        ),
        "many_ratio": many_ratio,
        "seed_ratio": totals["seed_backoff"] / totals["webhook"],
        "close": close if abs(many_ratio - 1) < 0.1 else ".",
        "prices_table": markdown_table(
            "price|per unit|as published|source|as of", cost.price_rows()
        ),
        "prices_as_of": cost.PRICES_AS_OF,
    }


def render(
    sweep: dict[str, Any],
    latency: dict[str, Any],
    *,
    lines: dict[str, list[cost.Line]],
    receiver: dict[str, Any],
    cadence: Cadence,
    sources: dict[str, dict[str, Any]],
    pipeline: dict[str, Any],
) -> str:
    """``templates/results.md`` filled from the saved runs."""
    polling = {int(n): figures for n, figures in sweep["polling"].items()}
    pipelines = {int(n): figures for n, figures in sweep["pipelines"].items()}
    counts = sorted(polling)
    table = requests_table(polling, pipelines)
    largest = max(counts)
    big = pipelines[largest]
    about = sweep["machine"]
    missed = {
        (n, name): polling[n][name]["missed"]
        for n in counts
        for name in POLLERS
        if polling[n][name]["missed"]
    }
    reference = json.loads((RESULTS / "polling.json").read_text())["figures"]  # time scale 1
    latency_rows, checks = _latency_rows(latency["demos"], cadence.threshold_seconds)
    assumptions = cost.Assumptions.on(cadence)
    fields = {
        "quick": " --quick" if sweep["plan"]["quick"] else "",
        "about": about,
        "elapsed": sweep["wall_seconds"] + latency["wall_seconds"],
        "c": cadence,
        "a": assumptions,
        "slow_sweeps": every(cadence.full_sweep_seconds),
        "sources_table": _sources_table(sources),
        "changed": _changed(cadence),
        "counts": ", ".join(map(str, counts)),
        "plan": sweep["plan"],
        "submit_rate": SUBMIT_RATE,
        "settle_minutes": sweep["settle_seconds"] / 60,
        "demo": latency["args"],
        "largest": largest,
        "requests_table": markdown_table(
            "|".join(["mode", *(f"{n} jobs" for n in counts)]),
            [[LABELS[m], *(_fmt(v) for v in table[m])] for m in MODES],
        ),
        "big": big,
        "gap_minutes": cadence.gap_memory_seconds / 60,
        "missed": f"Jobs a poller never saw settle: {missed}.\n\n" if missed else "",
        "reference": ", ".join(
            f"{LABELS[name]} {reference[name]['requests_per_job']}" for name in POLLERS
        ),
        "settled": ", ".join(str(pipelines[n]["settled_jobs"]) for n in counts),
        "throttled": sum(int(pipelines[n]["statuses"].get("429", 0)) for n in counts),
        "reads": ", ".join(f"`{r}` {n}" for r, n in sorted(big["reads"].items())),
        "latency_table": markdown_table(
            f"chaos|stored units|p50 (s)|p90 (s)|p99 (s)|max (s)|≥ {cadence.threshold_seconds:g} s "
            "(units)|recovered by the reconciler|lost / twice",
            latency_rows,
        ),
        "late": cadence.threshold_seconds + cadence.interval_seconds,
        "checks": "; ".join(checks),
        "events": _events_section(pipeline, big) if pipeline else "",
        "runs": assumptions.reconciler_runs_per_job * cost.PER_MILLION,
        "arch": "arm64" if assumptions.arm64 else "x86",
        "receiver_own_ms": receiver.get("handler_own_ms", {}).get("p50", "?"),
        **_cost_fields(lines),
    }
    return TEMPLATE.read_text().format_map(fields)


def _changed(then: Cadence) -> str:
    """A warning when ``template.yaml``'s reconciler is no longer the one the runs had."""
    now = Cadence.from_template()
    if then == now:
        return ""
    return (
        f"**`template.yaml`'s reconciler has changed since these runs** (now `{now.schedule}`, "
        f"threshold {now.threshold_seconds:g} s, overlap {now.overlap_seconds:g} s): run "
        "`make bench` again.\n\n"
    )


# -- entry point -----------------------------------------------------------------------------


def _load(results: Path, name: str, *, required: bool = False) -> dict[str, Any]:
    """``results/name.json``; {} when missing, unless ``required``."""
    path = results / f"{name}.json"
    if required and not path.exists():
        raise SystemExit(f"{path} is missing: run `python -m bench.{name}` (make bench) first")
    loaded: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return loaded


def build(results: Path, out_dir: Path, log: Callable[[str], None] = print) -> Path:
    """Read ``results/*.json``, write ``out_dir/RESULTS.md`` and ``out_dir/charts/*.png``."""
    sweep = _load(results, "sweep", required=True)
    latency = _load(results, "latency", required=True)
    receiver = _load(results, "receiver")
    pipeline = _load(results, "pipeline")
    # JSON keys are strings: the job counts again as numbers.
    polling = {int(n): figures for n, figures in sweep["polling"].items()}
    pipelines = {int(n): figures for n, figures in sweep["pipelines"].items()}
    cadence = Cadence.from_saved(sweep["reconciler"])  # the cadence the runs had
    lines = cost_lines(polling, pipelines[max(pipelines)], receiver, cost.Assumptions.on(cadence))
    sources = {"sweep": sweep, "latency": latency, "pipeline": pipeline, "receiver": receiver}
    sources.update({name: _load(results, name) for name in ("polling", "scale", "submit")})
    charts = out_dir / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    chart_requests(
        charts / "requests_per_job.png", sorted(polling), requests_table(polling, pipelines)
    )
    chart_latency(charts / "latency.png", latency["demos"], cadence.threshold_seconds)
    chart_cost(charts / "cost_per_million.png", lines)
    text = render(
        sweep,
        latency,
        lines=lines,
        receiver=receiver,
        cadence=cadence,
        sources={name: doc for name, doc in sources.items() if doc},
        pipeline=pipeline,
    )
    # The scale and submit benchmarks take minutes (make bench-scale, make bench-submit): their
    # sections come from their JSON.
    for section in (scale.from_saved(out_dir), submit.from_saved()):
        if section:
            text = text.rstrip("\n") + "\n\n" + section
    path = out_dir / "RESULTS.md"
    path.write_text(text)
    log(f"wrote {path}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the JSON files are")
    parser.add_argument("--out", type=Path, default=BENCH, help="where RESULTS.md and charts/ go")
    args = parser.parse_args(argv)
    build(args.results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
