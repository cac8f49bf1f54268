"""template.yaml as data, SAM's own translator, and the SAM CLI tool environment, offline.

The translator runs inside `.venv-sam` (aws-sam-cli brings the aws-sam-translator that
`sam validate` uses); the app venv only has cfn-lint. Templates travel as JSON over stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import cfn_yaml

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"
SAMCONFIG = REPO / "samconfig.toml"
SAM_VENV_BIN = REPO / ".venv-sam" / "bin"
SAM = SAM_VENV_BIN / "sam"
SAM_PYTHON = SAM_VENV_BIN / "python"
REGION = "us-east-1"

# Local code paths `sam validate` swaps for a fake S3 URI before translating (as samcli's
# SamTemplateValidator does): the translator accepts only s3:// locations.
_LOCAL_URI_PROPERTIES = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
    "AWS::Serverless::Api": "DefinitionUri",
    "AWS::Serverless::HttpApi": "DefinitionUri",
    "AWS::Serverless::StateMachine": "DefinitionUri",
}
_FAKE_S3_URI = "s3://bucket/value"

# Runs under .venv-sam/bin/python. The managed-policy loader is a stub that knows no policy
# name and counts its calls: the translator asks it only for a name missing from its
# bundled map, which online would be an IAM call that fails offline.
_TRANSLATE_SCRIPT = """
import json
import sys

from samtranslator.translator.transform import transform


class OfflineManagedPolicyLoader:
    calls = 0

    def load(self):
        OfflineManagedPolicyLoader.calls += 1
        return {}


translated = transform(json.load(sys.stdin), {}, OfflineManagedPolicyLoader())
json.dump({"template": translated, "loader_calls": OfflineManagedPolicyLoader.calls}, sys.stdout)
"""


@dataclass(frozen=True)
class Translation:
    """The CloudFormation SAM produced, and how often it needed the managed-policy loader."""

    template: dict[str, Any]
    loader_calls: int


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """A template with its short-form tags (!Ref, !Sub, !GetAtt) as long-form intrinsics."""
    loaded = cfn_yaml.load(str(path))
    plain: dict[str, Any] = json.loads(json.dumps(loaded))
    return plain


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


def with_fake_code_uris(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of the template whose local code paths point at S3, as `sam validate` does."""
    copy: dict[str, Any] = json.loads(json.dumps(template))
    function_globals = copy.get("Globals", {}).get("Function", {})
    if isinstance(function_globals.get("CodeUri"), str):
        function_globals["CodeUri"] = _FAKE_S3_URI
    for resource in copy.get("Resources", {}).values():
        key = _LOCAL_URI_PROPERTIES.get(resource.get("Type", ""))
        props = resource.get("Properties", {})
        value = props.get(key) if key else None
        if key and isinstance(value, str) and not value.startswith("s3://"):
            props[key] = _FAKE_S3_URI
    return copy


def translate(template: dict[str, Any]) -> Translation:
    """Translate a SAM template to CloudFormation with aws-sam-translator, offline."""
    require_sam_tools()
    result = run([SAM_PYTHON, "-c", _TRANSLATE_SCRIPT], stdin=json.dumps(template), timeout=60)
    if result.returncode != 0:
        pytest.fail(f"aws-sam-translator rejected the template:\n{describe(result)}")
    out = json.loads(result.stdout)
    return Translation(template=out["template"], loader_calls=int(out["loader_calls"]))


def resources_of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for every resource of one type."""
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if resource.get("Type") == type_
    }


def only_resource(template: dict[str, Any], type_: str) -> tuple[str, dict[str, Any]]:
    """The one resource of a type (fails when there are none or several)."""
    found = resources_of_type(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.items()))


def parameter_default(template: dict[str, Any], name: str) -> Any:
    """A parameter's declared default (fails when the parameter or its default is missing)."""
    parameter = template["Parameters"][name]
    assert "Default" in parameter, f"parameter {name} has no Default"
    return parameter["Default"]


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


def references(value: Any, logical_id: str) -> bool:
    """Whether an intrinsic (Ref, GetAtt, Sub and its variables) points at a resource."""
    text = json.dumps(value)
    return (
        f'"Ref": "{logical_id}"' in text
        or f'"{logical_id}", ' in text
        or f"${{{logical_id}}}" in text
        or f"${{{logical_id}." in text
    )
