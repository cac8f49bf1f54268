"""The scale benchmark's figures as markdown and a chart, from ``bench/results/scale.json``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.report import RESULTS, load_text, markdown_table

BENCH = Path(__file__).resolve().parent
TEMPLATE = BENCH / "templates" / "scale.md"  # the section's prose, figures as fields
RESULTS_MD = BENCH / "RESULTS.md"
SCALE_JSON = RESULTS / "scale.json"
CHART = "scale_lag.png"
HEADING = "## Scale: reconciler lag at sustained settle rates"
BEGIN, END = "<!-- bench:scale -->", "<!-- /bench:scale -->"
SMALL_COUNT = 100  # below it, calls per 1,000 jobs keep three significant digits
_BLOCK = re.compile(rf"{re.escape(BEGIN)}\n.*?{re.escape(END)}\n?", re.S)


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
            "cpu": about.get("cpu_model", about["machine"]),
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


def with_section(text: str, document: dict[str, Any]) -> str:
    """``text`` with the section replaced, or appended when it has none."""
    block = section(document)
    if _BLOCK.search(text):
        return _BLOCK.sub(lambda _: block, text)
    return text.rstrip("\n") + "\n\n" + block


def from_saved(out_dir: Path, source: Path = SCALE_JSON) -> str:
    """The section from the saved JSON, its chart drawn into ``out_dir``; "" when none saved."""
    if not source.exists():
        return ""
    document = json.loads(source.read_text())
    chart(document, out_dir / "charts" / CHART)
    return section(document)


def save(document: dict[str, Any], out: str | Path, results_md: Path = RESULTS_MD) -> None:
    """Write the JSON, the chart next to RESULTS.md, and the section into RESULTS.md."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    chart(document, results_md.parent / "charts" / CHART)
    text = results_md.read_text() if results_md.exists() else "# Benchmark results\n"
    results_md.write_text(with_section(text, document))
