"""Cold-start benchmark: each function's handler imported as Lambda imports it, from `sam build`.

python -m bench.cold_start [--repeats 20] [--build-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cfnlint.decode import cfn_yaml

from bench.report import fill, load_average, markdown_table, percentile, save

ROOT = Path(__file__).resolve().parents[1]
SAM_VENV_BIN = ROOT / ".venv-sam" / "bin"
LAYER = "SharedLayer"
REGION = "us-east-1"
# The venv of boto3 alone outlives a run (created once, pip's cache allowed); keyed by version.
VENV_HOME = Path(tempfile.gettempdir()) / "scrape-pipeline-bench"

# What Powertools' Tracer needs besides the layer (it is not in it: the template's tracing is
# Lambda's and API Gateway's own segments). aws-xray-sdk 2.15.0 is the release Powertools
# 3.37's `tracer` extra accepts; wrapt is its one dependency the runtime lacks.
TRACER_PACKAGES = ("aws-xray-sdk==2.15.0", "wrapt==2.5.2")
TRACER = "xray-sdk"
# After the handler's import: a module-level Tracer, which patches boto3, httpx and the rest.
_WITH_TRACER = "from aws_lambda_powertools import Tracer; Tracer()"
# What Lambda sets for the X-Ray SDK in an actively traced function's init (the trace id
# comes with each invocation).
_TRACED_ENV = {
    "AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129:2000",
    "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
}

# Prints the import statement's own wall and CPU times, in milliseconds.
_PROGRAM = """
import time
started, cpu = time.perf_counter(), time.process_time()
import {module}
{then}
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
"""


def python312() -> Path:
    """The base python3.12 (what `sam build` compiles with, and what the runtime runs)."""
    base = Path(sys.base_prefix) / "bin" / "python3.12"
    found = str(base) if base.is_file() else shutil.which("python3.12")
    if not found:
        raise SystemExit("python3.12 is not on PATH")
    return Path(found)


def sam_build(out: Path) -> Path:
    """`sam build` of the repository into ``out`` (caches off: nothing written in the repo)."""
    sam = SAM_VENV_BIN / "sam"
    if not sam.is_file():
        raise SystemExit(f"{sam} is missing: run `make sam-tools`")
    env = dict(os.environ, SAM_CLI_TELEMETRY="0", AWS_DEFAULT_REGION=REGION)
    env["PATH"] = os.pathsep.join([str(SAM_VENV_BIN), str(python312().parent), env["PATH"]])
    build = out / "build"
    args = [sam, "build", "--template", ROOT / "template.yaml", "--build-dir", build]
    args += ["--base-dir", ROOT, "--no-cached"]
    done = subprocess.run(
        [str(a) for a in args], cwd=out, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"sam build failed:\n{done.stdout}\n{done.stderr}")
    return build


def boto3_version() -> str:
    """boto3's version in constraints.txt (the one the tests run against)."""
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.startswith("boto3=="):
            return line.split("==", 1)[1].strip()
    raise SystemExit("boto3 is not pinned in constraints.txt")


def boto3_venv() -> Path:
    """A python3.12 venv with boto3 and its dependencies only; its python."""
    version = boto3_version()
    venv = VENV_HOME / f"py312-boto3-{version}"
    ready = venv / ".installed"
    if not ready.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([str(python312()), "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        pip += ["-c", str(ROOT / "constraints.txt"), f"boto3=={version}"]
        subprocess.run(pip, check=True)  # pip compiles boto3, as the runtime image ships it
        ready.touch()
    return venv / "bin" / "python"


def tracer_packages(python: Path) -> Path:
    """``TRACER_PACKAGES`` installed (with their byte code) into a folder of their own."""
    target = VENV_HOME / ("tracer-" + "-".join(p.replace("==", "-") for p in TRACER_PACKAGES))
    ready = target / ".installed"
    if not ready.is_file():
        shutil.rmtree(target, ignore_errors=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
        subprocess.run([*pip, str(target), *TRACER_PACKAGES], check=True)
        ready.touch()
    return target


def _set_writable(tree: Path, writable: bool) -> None:
    write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for path in [tree, *tree.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod((mode | stat.S_IWUSR) if writable else (mode & ~write))


@contextmanager
def read_only_copies(
    build: Path, functions: list[str], tracer: Path | None = None
) -> Iterator[dict[str, Path]]:
    """The layer and functions as shipped ("bytecode") and without any byte code ("source");
    the shipped copy also holds ``tracer`` (the Tracer's packages) as ``TRACER``, if given."""
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        copies = {"bytecode": Path(tmp) / "bytecode", "source": Path(tmp) / "source"}
        for name, copy in copies.items():
            for part in [LAYER, *functions]:
                ignore = shutil.ignore_patterns("__pycache__") if name == "source" else None
                shutil.copytree(build / part, copy / part, ignore=ignore)
            if tracer is not None and name == "bytecode":
                shutil.copytree(tracer, copy / TRACER)
            _set_writable(copy, writable=False)
        try:
            yield copies
        finally:
            for copy in copies.values():
                _set_writable(copy, writable=True)


def tree_bytes(tree: Path) -> int:
    """Bytes of the files in a tree (what `du` would count, block rounding aside)."""
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())


def functions_of(build: Path) -> dict[str, dict[str, Any]]:
    """Each built function's logical id -> its handler module and its environment."""
    template: dict[str, Any] = json.loads(json.dumps(cfn_yaml.load(str(build / "template.yaml"))))
    parameters = template.get("Parameters", {})

    def value(raw: Any) -> str:  # as Lambda would see it: parameter defaults, stand-ins
        if isinstance(raw, dict) and "Ref" in raw:
            return str(parameters.get(raw["Ref"], {}).get("Default", f"placeholder-{raw['Ref']}"))
        return f"placeholder-{next(iter(raw))}" if isinstance(raw, dict) else str(raw)

    common = template.get("Globals", {}).get("Function", {}).get("Environment", {})
    found = {}
    for name, resource in sorted(template["Resources"].items()):
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        variables = {**common.get("Variables", {}), **props.get("Environment", {})["Variables"]}
        found[name] = {
            "module": props["Handler"].rpartition(".")[0],
            "environment": {k: value(v) for k, v in variables.items()},
        }
    return found


def measure_once(
    python: Path, module: str, paths: list[Path], env: dict[str, str], then: str = ""
) -> list[float]:
    """One fresh interpreter: [import wall time, import CPU time, process time], in ms; ``then``
    runs after the import, inside the timed span.
    """
    full_env = dict(env, PYTHONPATH=os.pathsep.join(map(str, paths)))
    started = time.perf_counter()
    result = subprocess.run(
        [str(python), "-c", _PROGRAM.format(module=module, then=then)],
        env=full_env,
        cwd=paths[0] if paths else env["HOME"],
        capture_output=True,
        text=True,
        check=False,
    )
    process_ms = (time.perf_counter() - started) * 1000
    if result.returncode != 0:
        raise SystemExit(f"import {module} failed:\n{result.stderr}")
    wall, cpu = (float(v) for v in result.stdout.split())
    return [round(wall, 3), round(cpu, 3), round(process_ms, 3)]


def summary(samples: list[list[float]]) -> dict[str, Any]:
    walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
    return {
        "median_ms": round(statistics.median(walls), 1),
        "p90_ms": round(percentile(walls, 90), 1),
        "cpu_median_ms": round(statistics.median(cpus), 1),
        "cpu_p90_ms": round(percentile(cpus, 90), 1),
        "process_median_ms": round(statistics.median(s[2] for s in samples), 1),
        "samples_ms": walls,
        "cpu_samples_ms": cpus,
    }


def _ratio(a: dict[str, Any], b: dict[str, Any], key: str) -> float:
    return round(float(a[key]) / float(b[key]), 2)


def _less(a: dict[str, Any], b: dict[str, Any], key: str) -> float:
    return round(float(a[key]) - float(b[key]), 1)


def run(build: Path, repeats: int, warmup: int) -> dict[str, Any]:
    python = boto3_venv()
    tracer = tracer_packages(python)
    functions = functions_of(build)
    with tempfile.TemporaryDirectory(prefix="cold-start-home-") as home:
        base_env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
        base_env |= {"PYTHONDONTWRITEBYTECODE": "1", "AWS_EC2_METADATA_DISABLED": "true"}
        base_env |= {"AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}
        base_env |= {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
        with read_only_copies(build, list(functions), tracer) as copies:
            # (name, module, sys.path, environment, what follows the import) per program
            cases: list[tuple[str, str, list[Path], dict[str, str], str]] = [
                ("boto3", "boto3", [], base_env, "")
            ]
            for function, about in functions.items():
                env = {**base_env, **about["environment"], "AWS_LAMBDA_FUNCTION_NAME": function}
                for variant in ("source", "bytecode"):
                    copy = copies[variant]
                    paths = [copy / function, copy / LAYER / "python"]
                    cases.append((f"{function}/{variant}", about["module"], paths, env, ""))
                shipped = copies["bytecode"]
                paths = [shipped / function, shipped / LAYER / "python", shipped / TRACER]
                traced = {**env, **_TRACED_ENV, "LAMBDA_TASK_ROOT": str(shipped / function)}
                cases.append((f"{function}/tracer", about["module"], paths, traced, _WITH_TRACER))
            samples: dict[str, list[list[float]]] = {case[0]: [] for case in cases}
            for round_ in range(warmup + repeats):
                for name, module, paths, env, then in cases:
                    sample = measure_once(python, module, paths, env, then)
                    if round_ >= warmup:
                        samples[name].append(sample)
            sizes = {
                variant: tree_bytes(copies[variant] / LAYER) for variant in ("source", "bytecode")
            }
    boto3 = summary(samples["boto3"])
    figures: dict[str, Any] = {
        "repeats": repeats,
        # other work on the machine inflates wall times (the CPU times less so)
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "boto3": boto3,
        "layer_bytes": sizes,
        "functions": {},
    }
    for function in functions:
        f = {v: summary(samples[f"{function}/{v}"]) for v in ("source", "bytecode", "tracer")}
        figures["functions"][function] = {
            **f,
            "tracer_added_ms": _less(f["tracer"], f["bytecode"], "median_ms"),
            "tracer_added_cpu_ms": _less(f["tracer"], f["bytecode"], "cpu_median_ms"),
            "ratio_tracer_to_bytecode": _ratio(f["tracer"], f["bytecode"], "median_ms"),
            "cpu_ratio_tracer_to_bytecode": _ratio(f["tracer"], f["bytecode"], "cpu_median_ms"),
            "ratio_source_to_boto3": _ratio(f["source"], boto3, "median_ms"),
            "ratio_bytecode_to_boto3": _ratio(f["bytecode"], boto3, "median_ms"),
            "cpu_ratio_source_to_boto3": _ratio(f["source"], boto3, "cpu_median_ms"),
            "cpu_ratio_bytecode_to_boto3": _ratio(f["bytecode"], boto3, "cpu_median_ms"),
        }
    return figures


def table(figures: dict[str, Any]) -> str:
    def row(label: str, variant: str, f: dict[str, Any], ratios: tuple[str, str]) -> list[str]:
        return [
            label,
            variant,
            f"{f['median_ms']} / {f['p90_ms']}",
            ratios[0],
            f"{f['cpu_median_ms']} / {f['cpu_p90_ms']}",
            ratios[1],
        ]

    rows: list[list[Any]] = []
    for function, f in figures["functions"].items():
        for variant, name in (("source", "(a) no byte code"), ("bytecode", "(b) as shipped")):
            ratios = (
                f"{f[f'ratio_{variant}_to_boto3']}×",
                f"{f[f'cpu_ratio_{variant}_to_boto3']}×",
            )
            rows.append(row(f"`{function}`: `import app`", name, f[variant], ratios))
        ratios = (
            f"{f['ratio_tracer_to_bytecode']}× (b), +{f['tracer_added_ms']} ms",
            f"{f['cpu_ratio_tracer_to_bytecode']}× (b), +{f['tracer_added_cpu_ms']} ms",
        )
        label = f"`{function}`: `import app`, then `Tracer()`"
        rows.append(row(label, "(d) as shipped + X-Ray SDK", f["tracer"], ratios))
    rows.append(row("bare `import boto3`", "(c) runtime's", figures["boto3"], ("1×", "1×")))
    headers = ["import", "byte code", "wall ms: median / p90", "÷ (c)", "CPU ms: median / p90"]
    return fill(
        "cold_start",
        table=markdown_table([*headers, "÷ (c)"], rows),
        repeats=figures["repeats"],
        load=figures["load_average_1m_after"],
        cpus=os.cpu_count(),
        mib={k: round(v / 2**20, 1) for k, v in figures["layer_bytes"].items()},
        tracer=", ".join(TRACER_PACKAGES),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--build-dir", type=Path, help="an existing `sam build` output")
    args = parser.parse_args(argv)
    if args.repeats < 15:
        parser.error("--repeats must be at least 15 (a p90 of fewer says little)")
    with tempfile.TemporaryDirectory(prefix="cold-start-build-") as tmp:
        load_start = load_average()
        build = args.build_dir or sam_build(Path(tmp))
        figures = run(build, args.repeats, args.warmup)
    text = table(figures)
    print(text)
    save("cold_start", figures, text, load_start=load_start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
