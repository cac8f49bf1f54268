"""Where benchmark figures go: a JSON file per benchmark and a table in the README."""

from __future__ import annotations

import json
import platform
import re
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import os

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def save(name: str, figures: dict[str, Any], table: str, *, directory: Path = RESULTS) -> Path:
    """Write ``<directory>/<name>.json`` (``bench/results``) and put ``table`` in the README's
    marked block, if it has one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **figures}, indent=2, sort_keys=True) + "\n")
    if directory == RESULTS and README.exists():
        text = README.read_text()
        pattern = re.compile(rf"(<!-- bench:{name} -->\n).*?(\n<!-- /bench:{name} -->)", re.S)
        if pattern.search(text):
            about = machine()
            stamp = (
                f"_Measured {about['date']} on {about['cpus']} CPUs, Python {about['python']}._\n\n"
            )
            README.write_text(pattern.sub(lambda m: m.group(1) + stamp + table + m.group(2), text))
    return path


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
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
