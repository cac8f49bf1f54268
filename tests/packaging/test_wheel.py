"""The wheel, installed without extras in a fresh venv, gives a working operator CLI.

What ``pipx install .`` or ``pip install scrape-pipeline`` gives an operator: the runtime's
dependencies only (no rich, no local stack). The wheel is built from a copy of the sources (a
build writes build/ and *.egg-info beside them; none of that may land in layers/shared/).
The dependencies come from the package registry through pip's cache: about 10 s warm, up to
a minute cold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "layers/shared/scrape_pipeline")
PACKAGES = ("scrape_pipeline_ops", "scrape_pipeline_local")
INSTALL_HINT = "pip install 'scrape-pipeline[local]'"

pytestmark = pytest.mark.timeout(600)


@dataclass(frozen=True)
class Installed:
    """A fresh venv holding the wheel, and the wheel itself."""

    bin: Path
    wheel: Path

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            check=False,
            env=_clean_env(),
            timeout=120,
        )


def _clean_env() -> dict[str, str]:
    """This environment without the test venv's traces (nothing leaks into the fresh one), nor
    any pipeline or AWS setting an earlier test of this worker may have left: a new user's
    shell has no API key, no stack and no endpoint."""
    leaks = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "AWS_ENDPOINT_URL")
    pipeline = ("GEONODE_", "WEBHOOK_", "LEDGER_", "QUEUE_", "DLQ_", "RESULTS_", "SIGNATURE_")
    return {k: v for k, v in os.environ.items() if k not in leaks and not k.startswith(pipeline)}


def _python312() -> str:
    base = Path(sys.base_prefix) / "bin" / "python3.12"
    found = str(base) if base.is_file() else shutil.which("python3.12")
    assert found, "python3.12 is not on PATH"
    return found


def _pip(python: str | Path, *args: str, cwd: Path) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=_clean_env(),
        timeout=480,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel built from a copy of the sources, installed without extras in a new venv."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in (*SOURCES, *PACKAGES):
        origin, target = REPO / name, source / name
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=ignore)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)
    # "./source", not "source": a bare name is a requirement to look up on the registry.
    _pip(sys.executable, "wheel", "--no-deps", "--wheel-dir", "dist", "./source", cwd=work)
    [wheel] = (work / "dist").glob("scrape_pipeline-*.whl")
    venv = work / "venv"
    # No pip of its own (ensurepip's copy is most of a venv's making): this pip installs into
    # it through ``--python``, what the venv's own pip would put there.
    subprocess.run(
        [_python312(), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    _pip(
        sys.executable,
        "--python",
        str(venv / "bin" / "python"),
        "install",
        "-c",
        str(REPO / "constraints.txt"),
        str(wheel),
        cwd=work,
    )
    return Installed(venv / "bin", wheel)


def test_wheel_installs_the_three_packages_and_nothing_else(installed: Installed):
    # GIVEN the wheel's files
    with zipfile.ZipFile(installed.wheel) as wheel:
        top = {name.split("/")[0] for name in wheel.namelist()}
    # THEN the runtime, the operator tools and the local stack, all named after the project
    assert {t for t in top if not t.endswith(".dist-info")} == {"scrape_pipeline", *PACKAGES}


def test_wheel_declares_and_carries_the_apache_licence(installed: Installed):
    # GIVEN the wheel's metadata and files
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = wheel.read(metadata).decode().split("\n\n", 1)[0].splitlines()
        [licence] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        text = wheel.read(licence).decode()
    # THEN it names Apache-2.0 as an SPDX expression and ships the licence's own text
    assert "License-Expression: Apache-2.0" in headers
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert text == (REPO / "LICENSE").read_text()


def test_installed_cli_help_version_and_plain_output_without_rich(installed: Installed):
    # GIVEN the venv has no rich (the `cli` extra)
    probe = installed.run("python", "-c", "import importlib.util as u; print(u.find_spec('rich'))")
    assert probe.stdout.strip() == "None"
    # WHEN the operator asks for help and the version
    helped = installed.run("scrape-pipeline", "--help")
    version = installed.run("scrape-pipeline", "--version")
    # THEN both answer, from the installed distribution
    assert helped.returncode == 0 and helped.stderr == ""
    assert "webhooks" in helped.stdout and "local" in helped.stdout
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert (version.returncode, version.stdout, version.stderr) == (
        0,
        f"scrape-pipeline {expected}\n",
        "",
    )


def test_installed_cli_offline_command_fails_in_one_line(installed: Installed):
    # GIVEN no API key anywhere, WHEN a command needs one, THEN one line and exit 2
    failed = installed.run("scrape-pipeline", "webhooks", "list")
    assert failed.returncode == 2, failed.stderr
    assert failed.stderr.splitlines() == [
        "scrape-pipeline: error: no API key: set GEONODE_SCRAPER_API_KEY, or pass --api-key "
        "or --api-key-secret-id"
    ]


@pytest.mark.parametrize(
    ("argv", "prefix", "hint"),
    [
        # `local up` runs the checkout's handlers: the wheel lacks both, and the line says so.
        (
            ("scrape-pipeline", "local", "up"),
            "scrape-pipeline: error: scrape-pipeline local runs the handlers from a checkout",
            "installed with pip install -e '.[local]'",
        ),
        (("geonode-sim", "--help"), "geonode-sim needs", INSTALL_HINT),
    ],
)
def test_installed_local_commands_name_the_missing_extra(
    installed: Installed, argv: tuple[str, ...], prefix: str, hint: str
):
    # WHEN a command of the local stack runs without the `local` extra
    done = installed.run(*argv)
    # THEN one line on stderr says all it needs at once, exit 2, no traceback
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(prefix), line
    assert "not installed" in line, line
    assert line.endswith(hint), line
    assert "Traceback" not in done.stdout + done.stderr
