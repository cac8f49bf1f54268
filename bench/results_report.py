"""The benchmark results as one document: ``bench/RESULTS.md``, its tables and PNG charts.

python -m bench.results_report [--results bench/results] [--out bench]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cost, scale_report, submit
from bench.cadence import Cadence, every
from bench.pipeline import SETTLE_SECONDS
from bench.report import RESULTS, load_text, machine, markdown_table, percentile
from bench.sweep import POLLERS, SUBMIT_RATE

BENCH = Path(__file__).resolve().parent
MODES = (*POLLERS, "webhook")
LABELS = {
    "fixed_1s": "fixed 1 s poller",
    "seed_backoff": "seed article's backoff poller",
    "many_jobs": "many-jobs poller",
    "webhook": "webhook pipeline",
}
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
        outcomes=run["settled_jobs"] - run.get("resubmissions", 0),
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


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def chart_requests(path: Path, counts: list[int], table: dict[str, list[float]]) -> None:
    plt = _pyplot()
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
    plt = _pyplot()
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
    plt = _pyplot()
    modes = ["webhook", "many_jobs", "seed_backoff", "fixed_1s"]
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


def _polling_reference() -> str:
    import json

    path = RESULTS / "polling.json"
    if not path.exists():
        return ""
    figures = json.loads(path.read_text()).get("figures", {})
    return ", ".join(
        f"{LABELS[name]} {figures[name]['requests_per_job']}" for name in POLLERS if name in figures
    )


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def _price(value: float) -> str:
    return "$" + f"{value:.10f}".rstrip("0").rstrip(".")


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.01 else f"${value:.4f}"


def render(
    plan: Plan,
    *,
    polling: dict[int, Any],
    pipelines: dict[int, Any],
    demos: dict[str, Any],
    lines: dict[str, list[cost.Line]],
    receiver: dict[str, Any],
    elapsed: float,
    cadence: Cadence,
    settle_seconds: float,
    assumptions: cost.Assumptions,
    sources: dict[str, dict[str, Any]] | None = None,
    pipeline: dict[str, Any] | None = None,
    about: dict[str, Any] | None = None,
) -> str:
    about = about or machine()
    threshold = cadence.threshold_seconds
    counts = sorted(polling)
    table = requests_table(polling, pipelines)
    largest = max(counts)
    big = pipelines[largest]
    out: list[str] = [
        "# Benchmark results",
        "",
        "_Drawn by `python -m bench.results_report` from `bench/results/*.json`, measured by "
        "`python -m bench.sweep"
        + (" --quick" if plan.quick else "")
        + f"` and `python -m bench.latency` on {about['date']} (UTC) on {about['cpus']} CPUs "
        f"({about.get('cpu_model', about['machine'])}), Python {about['python']}, in "
        f"{elapsed:.0f} s. The reconciler as `template.yaml` deployed it when they ran: "
        f"`{cadence.schedule}` ({cadence.every}), a {threshold:g} s threshold, a "
        f"{cadence.overlap_seconds:g} s overlap, the slow sweeps "
        f"{every(cadence.full_sweep_seconds)}. Do not edit: `make bench` writes it._",
        "",
        *_sources_section(sources or {}),
        "## What was run",
        "",
        f"* **Pollers**: for {', '.join(map(str, counts))} concurrent async extract jobs "
        f"(durations {plan.min_duration:g}–{plan.max_duration:g} s, the simulator's default "
        f"failure rates, no rate limit), the fixed 1 s poller, the seed article's backoff poller "
        f"and the many-jobs poller (`bench.polling`), one after the other on one simulator per "
        f"job count, each on its own account, time sped up {plan.time_scale:g}×. Requests are "
        "the simulator's count of GETs; submissions are not counted.",
        f"* **Webhook pipeline**: `bench.pipeline.run_pipeline` at the same job counts, submitted "
        f"at {SUBMIT_RATE:g} per simulated second (all in flight at once) on a manual clock: the "
        "real handlers, moto, the simulator's default failure rates, then "
        f"{settle_seconds / 60:g} simulated minutes for everything to settle, the reconciler "
        f"running {cadence.every}. Requests per "
        "*settled* job (resubmissions of retryable failures are jobs too), every read counted, "
        "the reconciler's included.",
        f"* **Latency**: `scrape_pipeline_local.demo.Demo(jobs={plan.demo_jobs}, chaos=…, seed="
        f"{plan.demo_seed})`, the run of `make demo`, without faults (`none`) and under the "
        "`default` profile (20 % of webhooks dropped, 20 % duplicated, reordering, a receiver "
        "outage, a secret rotation, a 429 burst). Per stored unit (extract job, batch item, "
        "crawl page): the ledger's finish time minus the simulator's settle time.",
        "* **Cost**: `bench/cost.py` at list prices, with the AWS calls counted in the "
        f"{largest}-job pipeline run (a botocore hook, by the function that made each call), the "
        "receiver's calls per delivery from `bench/results/receiver.json`, and the pollers' "
        f"requests at {largest} concurrent jobs.",
        "",
        "## Requests per job against concurrent jobs",
        "",
        markdown_table(
            ["mode", *(f"{n} jobs" for n in counts)],
            [[LABELS[m], *(_fmt(v) for v in table[m])] for m in MODES],
        ),
        "",
        "![Geonode requests per job against concurrent jobs](charts/requests_per_job.png)",
        "",
        "Geonode requests (GETs) per job, submissions excluded; one fetch per job is the floor. "
        "The fixed and the seed pollers pay per job whatever the concurrency. The many-jobs "
        "poller's list pages are shared by every job in flight, so it nears the floor as jobs "
        "grow. The pipeline's reconciler costs a few reads per run whatever the volume "
        f"({big['reconciler_runs']} runs in each pipeline run, {cadence.every}; the job list at "
        f"every run for the first {cadence.gap_memory_seconds / 60:g} minutes of a deployment), "
        "which weighs on few jobs only.",
        "",
    ]
    missed = {
        (n, name): polling[n][name]["missed"]
        for n in counts
        for name in POLLERS
        if polling[n][name]["missed"]
    }
    if missed:
        out += [f"Jobs a poller never saw settle: {missed}.", ""]
    reference = _polling_reference()
    if reference:
        out += [
            "The speed-up stretches every request's own time in simulated time, so on a busy "
            "machine the fixed and seed pollers ask a little less often than at time scale 1. "
            f"For reference, `bench/results/polling.json` (time scale 1, 200 jobs, the three "
            f"pollers at once): {reference}.",
            "",
        ]
    statuses = {n: pipelines[n]["statuses"] for n in counts}
    throttled = sum(int(s.get("429", 0)) for s in statuses.values())
    out += [
        "Pipeline runs: settled jobs "
        + ", ".join(str(pipelines[n]["settled_jobs"]) for n in counts)
        + f"; 429 answers {throttled}; reads by route at {largest} jobs: "
        + ", ".join(f"`{r}` {n}" for r, n in sorted(big["reads"].items()))
        + ".",
        "",
        "## Settle-to-stored latency of the webhook pipeline",
        "",
    ]
    rows = []
    for chaos, demo in demos.items():
        f = latency_figures(demo["latencies"], threshold)
        r = demo["report"]
        recovered = ", ".join(f"{n} {k}" for k, n in sorted(r["recovered"].items()) if n) or "0"
        rows.append(
            [
                chaos,
                f["count"],
                _fmt(f["p50"]),
                _fmt(f["p90"]),
                _fmt(f["p99"]),
                _fmt(f["max"]),
                f["over_threshold"],
                recovered,
                f"{r['lost']} / {r['processed_twice']}",
            ]
        )
    out += [
        markdown_table(
            [
                "chaos",
                "stored units",
                "p50 (s)",
                "p90 (s)",
                "p99 (s)",
                "max (s)",
                f"≥ {threshold:g} s (units)",
                "recovered by the reconciler",
                "lost / twice",
            ],
            rows,
        ),
        "",
        "![Settle-to-stored latency: histogram and CDF](charts/latency.png)",
        "",
        "Simulated seconds. The demo's clock moves in 5 s steps and webhooks go out at the "
        "steps, so a few seconds is the webhook path's resolution. Without faults every unit is "
        "stored through its webhook within seconds. Under the default chaos the tail is the "
        f"reconciler's: a dropped webhook's job (or a delivery the receiver's outage or the "
        f"rotation refused, which the sender would retry only minutes later) waits until it has "
        f"been settled {threshold:g} s and the next run ({cadence.every}) finds it, so about "
        f"{threshold:g} to {threshold + cadence.interval_seconds:g} s plus its processing; a "
        "window of 429s from the API, when the chaos puts one on such a job, adds its length.",
    ]
    checks = []
    for chaos, demo in demos.items():
        f = latency_figures(demo["latencies"], threshold)
        r = demo["report"]
        same = math.isclose(f["p50"], r["latency_p50"]) and math.isclose(f["p99"], r["latency_p99"])
        checks.append(
            f"{chaos}: {'same as' if same else 'differs from'} the demo's own p50 / p99 "
            f"({r['latency_p50']:.1f} s / {r['latency_p99']:.1f} s)"
        )
    out += ["", "Check: " + "; ".join(checks) + ".", ""]
    if pipeline is not None:
        out += _events_section(pipeline, big)
    out += _cost_section(lines, receiver, largest, assumptions, cadence)
    return "\n".join(out) + "\n"


def _sources_section(sources: dict[str, dict[str, Any]]) -> list[str]:
    """Each results file drawn here: when, on what and under which load it was measured."""
    if not sources:
        return []
    rows = []
    for name, doc in sources.items():
        about = doc.get("machine") or {}
        when = " ".join(str(about[k]) for k in ("date", "time") if k in about) or "not recorded"
        cpu = about.get("cpu_model", "model not recorded")
        rows.append(
            [
                f"`bench/results/{name}.json`",
                when,
                f"{about.get('cpus', '?')} CPUs ({cpu})",
                load_text(_load_of(doc)).removeprefix("load average "),
            ]
        )
    return [
        "## Where each figure comes from",
        "",
        markdown_table(["results", "measured (UTC)", "machine", "load average (1 min)"], rows),
        "",
        "The load is the machine's 1-minute load average when the benchmark began and when it "
        "saved (2 cores, shared with other work). The pollers' figures and every wall time "
        "depend on it; the pipeline's and the demos' run on a manual clock and do not.",
        "",
    ]


def _load_of(doc: dict[str, Any]) -> Any:
    """A file's load record; ``bench.submit``'s own names for files saved before ``save``'s."""
    if "load_average" in doc:
        return doc["load_average"]
    if "load_before" in doc:
        return {"start": doc["load_before"], "end": doc["load_after"]}
    return None


def _events_section(pipeline: dict[str, Any], big: dict[str, Any]) -> list[str]:
    """The outcome events of ``make bench-pipeline``, and PutEvents in the sweep's burst."""
    from bench.pipeline import events_table

    run = pipeline["pipeline"]
    if "events" not in run:  # saved before the events were measured
        return []
    cadence = Cadence.from_saved(pipeline["reconciler"])
    out = [
        "## Outcome events on the bus (`make bench-pipeline`)",
        "",
        f"{run['jobs_submitted']} jobs submitted over {pipeline['args']['spread']:g} simulated s "
        f"({run['settled_jobs']} settled), a rule and queue on the local stack's bus receiving "
        "every event.",
        "",
        events_table(run["events"], cadence, pipeline.get("event_linger", {}).get("events")),
        "",
    ]
    calls = big.get("aws_calls", {}).get("processor", {}).get("events:PutEvents")
    if calls is not None:
        outcomes = big["settled_jobs"] - big.get("resubmissions", 0)
        out += [
            f"In the sweep's largest pipeline run ({big['jobs_submitted']} jobs submitted at "
            f"{SUBMIT_RATE:g} a second, so the processor's batches fill): {calls} PutEvents "
            f"calls from the processor for {outcomes} outcomes, {calls / max(1, outcomes):.3f} "
            "per outcome. The processor puts its batch's events in one call at the batch's end: "
            "calls per outcome follow the batches' fill, which the arrival rate and the event "
            "source's batching window set.",
            "",
        ]
    return out


def _cost_section(
    lines: dict[str, list[cost.Line]],
    receiver: dict[str, Any],
    largest: int,
    a: cost.Assumptions,
    cadence: Cadence,
) -> list[str]:
    seed_total = cost.total(lines["seed_backoff"])
    webhook, many = cost.total(lines["webhook"]), cost.total(lines["many_jobs"])
    runs = a.reconciler_runs_per_job * cost.PER_MILLION
    close = (
        ": on cost the pipeline and the many-jobs poller are within the model's margin, and the "
        "choice between them rests on the rest (a public endpoint for the webhooks, a process "
        "that keeps running for the poller)."
        if abs(many / webhook - 1) < 0.1
        else "."
    )
    order = ["webhook", "many_jobs", "seed_backoff", "fixed_1s"]
    rows = []
    for mode in order:
        cats = cost.by_category(lines[mode])
        requests = sum(x.per_job for x in lines[mode] if x.component == "Geonode")
        rows.append(
            [
                LABELS[mode],
                _fmt(requests),
                _money(cats["geonode"]),
                _money(cats["aws"]),
                _money(cost.total(lines[mode])),
                f"{cost.total(lines[mode]) / seed_total:.2f}×",
            ]
        )
    detail = []
    for mode in order:
        for x in lines[mode]:
            detail.append(
                [
                    x.mode,
                    x.component,
                    x.item,
                    f"{x.per_job:.4g}",
                    x.unit,
                    _price(x.unit_price),
                    _money(x.per_million),
                    x.basis,
                ]
            )
    assumptions = [
        [
            "volume",
            f"{a.jobs_per_month:,.0f} jobs per month, steady",
            "spreads the time-based costs (reconciler runs, idle SQS polls, secret refreshes)",
        ],
        [
            "Lambda",
            f"{a.lambda_memory_mb} MB, {'arm64' if a.arm64 else 'x86'}",
            "template.yaml Globals",
        ],
        [
            "receiver duration",
            f"{a.receiver_ms:g} ms",
            "a ledger put and an SQS send in-region; its own work is "
            f"{receiver.get('handler_own_ms', {}).get('p50', '?')} ms (receiver.json)",
        ],
        [
            "processor duration",
            f"{a.processor_ms_per_job:g} ms per job",
            "one Geonode GET (~300 ms) plus the ledger and S3 calls; not measurable on moto",
        ],
        [
            "reconciler duration",
            f"{a.reconciler_ms_per_run:g} ms per run",
            "a few pages and queries",
        ],
        [
            "reconciler",
            f"a run every {a.reconcile_interval_s:g} s (`{cadence.schedule}`); the job list "
            f"every {a.job_list_interval_s:g} s while webhooks arrive complete (at every run for "
            f"{cadence.gap_memory_seconds:g} s after a run recovered a job), "
            f"{a.reconcile_overlap_s:g} s overlap, {a.jobs_page_size} jobs per list page",
            "template.yaml's defaults when the sweep ran (sweep.json); JOBS_PAGE_MAX",
        ],
        [
            "DynamoDB",
            f"{a.write_units_per_write:g} write unit per write, "
            f"{a.read_units_per_read:g} read unit per read or query",
            "rows under 1 KB; reads strongly consistent (upper bound for queries); a failed "
            "conditional write is billed too",
        ],
        [
            "SQS",
            f"1 request per call; idle: {a.esm_pollers} pollers × {a.esm_wait_s:g} s long polls",
            "messages far under 64 KB; the event source's empty polls are billed",
        ],
        [
            "S3",
            "the measured PUTs per job for every mode",
            "pollers store results as the processor does; no GETs measured",
        ],
        [
            "Secrets Manager",
            f"receiver every {a.receiver_secret_cache_s:g} s, processor every "
            f"{a.processor_secret_cache_s:g} s, {a.warm_containers} warm container each",
            "SECRET_CACHE_SECONDS; Powertools' cache",
        ],
        [
            "Geonode",
            "every request billed, submissions included; no free tier",
            "1,500 free requests a month ignored",
        ],
        [
            "pollers",
            f"requests per job at {largest} concurrent jobs; host not priced",
            "they run wherever the caller runs",
        ],
        [
            "left out",
            "storage (S3, DynamoDB), CloudWatch logs and metrics, alarms, data "
            "transfer, secret storage ($0.40 per secret-month, two secrets), the DLQ",
            "not per job",
        ],
    ]
    return [
        "## Cost per million jobs",
        "",
        markdown_table(
            [
                "mode",
                "Geonode requests per job (submission included)",
                "Geonode",
                "AWS",
                "total",
                "vs seed poller",
            ],
            rows,
        ),
        "",
        "![Cost per million jobs by mode](charts/cost_per_million.png)",
        "",
        "Geonode's per-request price makes the bill: each request per job is $350 per million "
        "jobs, the submission included. The pipeline's AWS side is mostly the S3 writes of the "
        "results, which any mode that stores them pays too. Its reconciler reads are priced at "
        f"the assumed volume ({runs:,.0f} runs per million jobs), not at the few jobs of one "
        f"run, hence fewer requests per job than in the table above. The many-jobs poller "
        f"comes to {many / webhook:.2f}× the pipeline's cost and the seed poller to "
        f"{seed_total / webhook:.2f}×" + close,
        "",
        "### Lines",
        "",
        markdown_table(
            [
                "mode",
                "component",
                "item",
                "per job",
                "unit",
                "unit price",
                "per million jobs",
                "basis",
            ],
            detail,
        ),
        "",
        "### Assumptions",
        "",
        markdown_table(["assumption", "value", "why"], assumptions),
        "",
        "### Prices",
        "",
        f"All prices: {cost.PRICES_AS_OF}. AWS prices are us-east-1 on-demand.",
        "",
        markdown_table(["price", "per unit", "as published", "source", "as of"], cost.price_rows()),
    ]


# -- entry point -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What the saved runs were: the sweep's plan and the demos' size."""

    job_counts: tuple[int, ...]
    time_scale: float
    min_duration: float
    max_duration: float
    demo_jobs: int
    demo_seed: int
    quick: bool


def _load(results: Path, name: str) -> dict[str, Any]:
    path = results / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python -m bench.{name}` (make bench) first")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _optional(results: Path, name: str) -> dict[str, Any]:
    path = results / f"{name}.json"
    loaded: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return loaded


def build(results: Path, out_dir: Path, log: Callable[[str], None] = print) -> Path:
    """Read ``results/*.json``, write ``out_dir/RESULTS.md`` and ``out_dir/charts/*.png``."""
    sweep = _load(results, "sweep")
    latency = _load(results, "latency")
    receiver = _optional(results, "receiver")
    # JSON keys are strings: the job counts again as numbers.
    polling = {int(n): figures for n, figures in sweep["polling"].items()}
    pipelines = {int(n): figures for n, figures in sweep["pipelines"].items()}
    demos: dict[str, Any] = latency["demos"]
    saved = sweep["plan"]
    plan = Plan(
        job_counts=tuple(saved["job_counts"]),
        time_scale=saved["time_scale"],
        min_duration=saved["min_duration"],
        max_duration=saved["max_duration"],
        demo_jobs=latency["args"]["jobs"],
        demo_seed=latency["args"]["seed"],
        quick=saved["quick"],
    )
    # The cadence the runs had (saved beside them), the template's for files saved before that.
    now = Cadence.from_template()
    cadence = Cadence.from_saved(sweep["reconciler"]) if "reconciler" in sweep else now
    assumptions = cost.Assumptions.on(cadence)
    lines = cost_lines(polling, pipelines[max(pipelines)], receiver, assumptions)
    pipeline = _optional(results, "pipeline")
    sources = {"sweep": sweep, "latency": latency, "pipeline": pipeline, "receiver": receiver}
    sources.update({name: _optional(results, name) for name in ("polling", "scale", "submit")})
    charts = out_dir / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    counts = sorted(polling)
    chart_requests(charts / "requests_per_job.png", counts, requests_table(polling, pipelines))
    chart_latency(charts / "latency.png", demos, cadence.threshold_seconds)
    chart_cost(charts / "cost_per_million.png", lines)
    path = out_dir / "RESULTS.md"
    text = render(
        plan,
        polling=polling,
        pipelines=pipelines,
        demos=demos,
        lines=lines,
        receiver=receiver,
        elapsed=sweep["wall_seconds"] + latency["wall_seconds"],
        cadence=cadence,
        settle_seconds=sweep.get("settle_seconds", SETTLE_SECONDS),
        assumptions=assumptions,
        sources={name: doc for name, doc in sources.items() if doc},
        pipeline=pipeline or None,
        about=sweep.get("machine"),
    )
    if cadence != now:
        text = text.replace(
            "\n## What was run",
            f"\n**`template.yaml`'s reconciler has changed since these runs** (now "
            f"`{now.schedule}`, threshold {now.threshold_seconds:g} s, overlap "
            f"{now.overlap_seconds:g} s): run `make bench` again.\n\n## What was run",
            1,
        )
    # The scale benchmark takes minutes (make bench-scale): its section comes from its JSON.
    scale = scale_report.from_saved(out_dir)
    if scale:
        text = text.rstrip("\n") + "\n\n" + scale
    submitting = submit.from_saved()  # make bench-submit, minutes too
    if submitting:
        text = text.rstrip("\n") + "\n\n" + submitting
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
