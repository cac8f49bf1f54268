"""The SAM CLI tool environment, and reading the template and its translation in tests.

template.yaml as data and its offline translation come from the local stack's own
``scrape_pipeline_local.translate`` (the translator `sam validate` uses, in-process); the SAM
CLI itself lives in `.venv-sam`.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline_local.translate import (
    only_resource,
    parameter_default,
    resources_of_type,
)
from scrape_pipeline_local.translate import template as load_template

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"
SAMCONFIG = REPO / "samconfig.toml"
SAM_VENV_BIN = REPO / ".venv-sam" / "bin"
SAM = SAM_VENV_BIN / "sam"
SAM_PYTHON = SAM_VENV_BIN / "python"
REGION = "us-east-1"
CONSTRAINTS = REPO / "constraints.txt"
LAYER_DIR = REPO / "layers" / "shared"
# What the layer names (top level), and the lock its build installs (`make layer-lock`).
LAYER_INPUTS = LAYER_DIR / "requirements.in"
LAYER_LOCK = LAYER_DIR / "requirements.txt"

__all__ = ["load_template", "only_resource", "parameter_default", "resources_of_type"]


def require_sam_tools() -> None:
    """Fail (not skip) with the fix when the SAM tool environment is missing."""
    if not (SAM.is_file() and SAM_PYTHON.is_file()):
        pytest.fail(
            f"{SAM} is missing: the SAM CLI lives in its own tool venv. "
            "Run `make sam-tools` (`make test` does it) and rerun.",
            pytrace=False,
        )


def tool_env(path_prefix: list[Path] | None = None) -> dict[str, str]:
    """The environment for SAM and cfn-lint: a region, no telemetry, no metadata endpoint."""
    env = dict(os.environ)
    env.update(
        SAM_CLI_TELEMETRY="0",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
    )
    if path_prefix:
        env["PATH"] = os.pathsep.join([*map(str, path_prefix), env.get("PATH", "")])
    return env


def run(
    args: list[str | Path],
    *,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run a tool; never raises on a non-zero exit (callers assert on it)."""
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=tool_env() if env is None else env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    """A failed command's exit code and output, for assertion messages."""
    return f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def function_environment(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    """A SAM function's environment variables: Globals first, then its own (SAM's merge)."""
    global_vars = (
        template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    )
    own = template["Resources"][logical_id]["Properties"].get("Environment", {})
    return {**global_vars, **own.get("Variables", {})}


def function_property(template: dict[str, Any], logical_id: str, name: str) -> Any:
    """A SAM function's property, falling back to Globals.Function (None when neither has it)."""
    own = template["Resources"][logical_id].get("Properties", {})
    if name in own:
        return own[name]
    return template.get("Globals", {}).get("Function", {}).get(name)


def as_list(value: Any) -> list[Any]:
    """A policy field that may be one value or a list, as a list."""
    return value if isinstance(value, list) else [value]


def function_role(template: dict[str, Any], logical_id: str) -> tuple[str, dict[str, Any]]:
    """The logical id and resource of the role SAM generated for a translated function."""
    role_id: str = template["Resources"][logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_id, template["Resources"][role_id]


def role_statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of a role's inline policies."""
    return [
        statement
        for policy in role["Properties"].get("Policies", [])
        for statement in as_list(policy["PolicyDocument"]["Statement"])
    ]


@dataclass(frozen=True)
class Pin:
    """One ``name==version`` requirement and the ``--hash`` options that came with it."""

    version: str
    hashes: tuple[str, ...]


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins(text: str) -> dict[str, Pin]:
    """Each requirement of a pip requirements file, by normalized name.

    Continuation lines are joined and comments dropped; anything but ``name==version`` followed
    by ``--hash=`` options (a range, a URL, another option) is an error: a lock holds none.
    """
    pins: dict[str, Pin] = {}
    for raw in text.replace("\\\n", " ").splitlines():
        tokens = raw.split("#", 1)[0].split()
        if not tokens:
            continue
        name, sep, version = tokens[0].partition("==")
        others = [t for t in tokens[1:] if not t.startswith("--hash=")]
        if not sep or not version or others or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise ValueError(f"not a pinned requirement: {raw.strip()!r}")
        hashes = tuple(t.removeprefix("--hash=") for t in tokens[1:])
        pins[normalized(name)] = Pin(version, hashes)
    return pins
