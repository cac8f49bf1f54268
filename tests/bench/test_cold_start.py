"""bench.cold_start's pure parts (the functions it finds in a build, the copies it times), and
what each function's import pulls in: a cold start pays for every module of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cold_start import LAYER, TRACER, functions_of, read_only_copies

REPO = Path(__file__).resolve().parents[2]
# Runtime modules a function must not import: another function's logic, or the API client
# for a function that never calls the API.
NOT_IMPORTED = {
    "receiver": {
        "scrape_pipeline.processor.processing",
        "scrape_pipeline.processor.batch_run",
        "scrape_pipeline.reconciler.run",
        "scrape_pipeline.reconciler.recovery",
        "scrape_pipeline.reconciler.sweeps.job_list",
        "scrape_pipeline.reconciler.sweeps.watch",
        "scrape_pipeline.geonode.client",
        "scrape_pipeline.wiring.processor",
        "scrape_pipeline.wiring.reconciler",
        "httpx",
        # What it never runs of its own modules: the queue's batch sends, the API's settings,
        # and the other functions' shared wiring.
        "scrape_pipeline.processor.queue",
        "scrape_pipeline.processor.bulk_send",
        "scrape_pipeline.geonode.settings",
        "scrape_pipeline.wiring.shared",
        # The sweeps' decisions (a webhook's rule is ``ledger.evidence``'s).
        "scrape_pipeline.ledger.decide",
    },
    "processor": {
        "scrape_pipeline.reconciler.run",
        "scrape_pipeline.reconciler.recovery",
        "scrape_pipeline.reconciler.sweeps.job_list",
        "scrape_pipeline.reconciler.sweeps.watch",
        "scrape_pipeline.receiver.webhook",
        "scrape_pipeline.wiring.reconciler",
        # Reached once through shared modules: the listing lag, the API key, the doubt look-up.
        "scrape_pipeline.reconciler.sweeps",
        "scrape_pipeline.receiver.signatures",
        "scrape_pipeline.receiver.secret_store",
        "scrape_pipeline.runs.journal",
        # The ledger's intake and the sweeps' decisions, the reconciler's batch sends, the
        # webhook answers of the API client.
        "scrape_pipeline.ledger.intake",
        "scrape_pipeline.ledger.full",
        "scrape_pipeline.ledger.evidence",
        "scrape_pipeline.ledger.decide",
        "scrape_pipeline.processor.bulk_send",
        "scrape_pipeline.geonode.webhooks",
    },
    "reconciler": {
        "scrape_pipeline.processor.processing",
        "scrape_pipeline.processor.batch_run",
        "scrape_pipeline.receiver.webhook",
        "scrape_pipeline.wiring.processor",
    },
}


# Functions and methods a function must not load, in a module it does load (a module
# that carried them once: the split must hold).
NOT_LOADED = {
    "receiver": {
        "scrape_pipeline.processor.message.JobMessage.from_json",
        "scrape_pipeline.ledger.lifecycle.decide",
        "scrape_pipeline.ledger.lifecycle.recovery_evidence",
    },
    "processor": {
        "scrape_pipeline.processor.queue.JobQueue.send_many",
        "scrape_pipeline.ledger.lifecycle.decide",
    },
}
_LOADED_NAMES = """
import json, sys
import app
found = []
for path in json.loads(sys.argv[1]):
    names = path.split(".")
    for cut in range(len(names) - 1, 0, -1):
        module = ".".join(names[:cut])
        if module in sys.modules:
            target = sys.modules[module]
            for name in names[cut:]:
                target = getattr(target, name, None)
            found += [path] if target is not None else []
            break
print(json.dumps(found))
"""


def imported_by(function: str) -> set[str]:
    """The modules ``import app`` loads in a fresh interpreter, run as Lambda runs it."""
    script = "import json, sys; import app; print(json.dumps(sorted(sys.modules)))"
    found = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO / "functions" / function,
        env={**os.environ, "PYTHONPATH": str(REPO / "layers" / "shared")},
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(found.stdout))


@pytest.mark.parametrize("function", sorted(NOT_IMPORTED))
def test_each_function_imports_its_own_wiring_and_not_the_others_logic(function: str) -> None:
    # GIVEN a function's handler module, imported alone as in its own container
    modules = imported_by(function)
    # THEN its own wiring module is loaded, and none of another function's logic
    assert f"scrape_pipeline.wiring.{function}" in modules
    assert sorted(modules & NOT_IMPORTED[function]) == []


@pytest.mark.parametrize("function", sorted(NOT_LOADED))
def test_each_function_loads_only_the_functions_it_runs(function: str) -> None:
    # GIVEN a function's handler module, imported alone as in its own container
    found = subprocess.run(
        [sys.executable, "-c", _LOADED_NAMES, json.dumps(sorted(NOT_LOADED[function]))],
        cwd=REPO / "functions" / function,
        env={**os.environ, "PYTHONPATH": str(REPO / "layers" / "shared")},
        capture_output=True,
        text=True,
        check=True,
    )
    # THEN none of what another function runs came with the modules it loaded
    assert json.loads(found.stdout) == []


# Lines of the runtime package a function loads at its cold start (issue 36's budgets): a
# feature that needs more is a sign to cut an edge, as the lists above do.
LOADED_LINES = {"receiver": 3000, "processor": 6000}


@pytest.mark.parametrize("function", sorted(LOADED_LINES))
def test_each_function_loads_at_most_its_budget_of_the_package(function: str) -> None:
    # GIVEN the runtime modules a function's handler loads, imported alone as in its container
    runtime = sorted(m for m in imported_by(function) if m.split(".")[0] == "scrape_pipeline")
    layer = REPO / "layers" / "shared"
    files = [
        next(p for p in (layer / f"{path}.py", layer / path / "__init__.py") if p.is_file())
        for path in (module.replace(".", "/") for module in runtime)
    ]
    lines = sum(len(file.read_text().splitlines()) for file in files)
    # THEN their lines are within the function's budget
    assert lines <= LOADED_LINES[function], f"{function} loads {lines} lines: {runtime}"


def test_functions_of_reads_handlers_and_environment_like_lambda(tmp_path: Path) -> None:
    # GIVEN a build directory holding the template (as sam build writes it beside the code)
    shutil.copy(REPO / "template.yaml", tmp_path / "template.yaml")
    # WHEN the benchmark reads the functions from it
    found = functions_of(tmp_path)
    # THEN every function, with its handler module and its merged environment
    assert set(found) == {
        "ReceiverFunction",
        "ProcessorFunction",
        "ReconcilerFunction",
        "SubmitterFunction",
    }
    receiver = found["ReceiverFunction"]
    assert receiver["module"] == "app"
    env = receiver["environment"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "receiver"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "ScrapePipeline"
    # AND parameters at their defaults, resources as stand-ins (all strings)
    assert env["SIGNATURE_SCHEME"] == "geonode"
    assert env["LEDGER_TABLE_NAME"] == "placeholder-LedgerTable"
    assert all(isinstance(v, str) for v in env.values())


def test_read_only_copies_strip_byte_code_from_the_source_copy_only(tmp_path: Path) -> None:
    # GIVEN a build with byte code in the layer and a function
    for part in (f"{LAYER}/python/pkg", "Fn"):
        (tmp_path / part / "__pycache__").mkdir(parents=True)
        (tmp_path / part / "m.py").write_text("")
        (tmp_path / part / "__pycache__" / "m.cpython-312.pyc").write_bytes(b"")
    # WHEN the two copies are made
    with read_only_copies(tmp_path, ["Fn"]) as copies:
        pycs = {name: sorted(copy.rglob("*.pyc")) for name, copy in copies.items()}
        pys = {name: len(list(copy.rglob("*.py"))) for name, copy in copies.items()}
        writable = (copies["bytecode"] / "Fn").stat().st_mode & 0o222
    # THEN the shipped copy keeps every .pyc, the source copy none, both every .py
    assert len(pycs["bytecode"]) == 2
    assert pycs["source"] == []
    assert pys == {"bytecode": 2, "source": 2}
    # AND both are read-only while timed
    assert writable == 0


def test_read_only_copies_put_the_tracer_packages_beside_the_shipped_layer_only(
    tmp_path: Path,
) -> None:
    # GIVEN a build and a folder of the Tracer's packages, with their byte code
    build, tracer = tmp_path / "build", tmp_path / "tracer"
    for part in (build / LAYER / "python", build / "Fn", tracer / "aws_xray_sdk" / "__pycache__"):
        part.mkdir(parents=True)
    (tracer / "aws_xray_sdk" / "__init__.py").write_text("")
    (tracer / "aws_xray_sdk" / "__pycache__" / "__init__.cpython-312.pyc").write_bytes(b"")
    # WHEN the copies are made with it
    with read_only_copies(build, ["Fn"], tracer) as copies:
        shipped = sorted(p.relative_to(copies["bytecode"]) for p in copies["bytecode"].rglob("*"))
        in_source = (copies["source"] / TRACER).exists()
        writable = (copies["bytecode"] / TRACER / "aws_xray_sdk").stat().st_mode & 0o222
    # THEN the shipped copy holds them as compiled, read-only, and the source copy does not
    assert Path(TRACER, "aws_xray_sdk", "__pycache__", "__init__.cpython-312.pyc") in shipped
    assert not in_source
    assert writable == 0
