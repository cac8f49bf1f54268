"""Where benchmark figures go: a JSON file per benchmark and a table on docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import platform
import re
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
README = ROOT / "docs" / "benchmarks.md"  # the benchmarks page


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``platform.processor()`` elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What the figures were measured on, and when (UTC)."""
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "time": time.strftime("%H:%M", time.gmtime()),
    }


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages: what else ran on the machine meanwhile."""
    return [round(v, 2) for v in os.getloadavg()]


def load_text(load: dict[str, Any]) -> str:
    """``load average 0.9 → 2.1``: the 1-minute average at start and end."""
    return f"load average {load['start'][0]:.1f} → {load['end'][0]:.1f}"


def stamp(figures: dict[str, Any]) -> str:
    """When, on what and under which load a saved figure was measured, for a README block."""
    about = figures["machine"]
    return (
        f"_Measured {about['date']} on {about['cpus']} CPUs ({about['cpu_model']}), Python "
        f"{about['python']}, {load_text(figures['load_average'])}._"
    )


def readme_block(document: dict[str, Any]) -> str:
    """What the README's ``<!-- bench:NAME -->`` block holds for a saved figure."""
    return stamp(document) + "\n\n" + str(document["readme_table"])


def save(
    name: str,
    figures: dict[str, Any],
    table: str,
    *,
    load_start: list[float],
    directory: Path = RESULTS,
) -> Path:
    """Write ``<directory>/<name>.json`` (``bench/results``) with the machine and the load at
    ``load_start`` and now, and put ``table`` in the README's marked block, if it has one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    document = {
        "machine": machine(),
        **figures,
        "load_average": {"start": load_start, "end": load_average()},
        "readme_table": table,  # the README's block is stamp() and this (a test compares)
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    if directory == RESULTS and README.exists():
        text = README.read_text()
        # An empty block (new in the README) is filled too.
        pattern = re.compile(rf"(<!-- bench:{name} -->\n)(?:.*?\n)?(<!-- /bench:{name} -->)", re.S)
        if pattern.search(text):
            block = readme_block(document) + "\n"
            README.write_text(pattern.sub(lambda m: m.group(1) + block + m.group(2), text))
    return path


def with_section(text: str, name: str, block: str) -> str:
    """``text`` with its ``<!-- bench:name -->`` section replaced by ``block``, or appended."""
    pattern = re.compile(rf"<!-- bench:{name} -->\n.*?<!-- /bench:{name} -->\n?", re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip("\n") + "\n\n" + block


def put_section(path: Path, name: str, block: str) -> None:
    """Write ``block`` as its section of ``path`` (RESULTS.md), made if missing."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    path.write_text(with_section(text, name, block))


def fill(template: str, **fields: Any) -> str:
    """``bench/templates/<template>.md`` with its named fields filled (its last newline off)."""
    return (BENCH / "templates" / f"{template}.md").read_text().rstrip("\n").format_map(fields)


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def markdown_table(headers: str | list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table; ``headers`` a list or one string split at ``|``."""
    if isinstance(headers, str):
        headers = headers.split("|")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]
