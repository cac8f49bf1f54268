"""samconfig.toml and the layer's requirements agree with the template and the constraints."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from tests.template.helpers import (
    CONSTRAINTS,
    LAYER_INPUTS,
    SAMCONFIG,
    load_template,
    requirement_pins,
)


def _samconfig() -> dict[str, Any]:
    return tomllib.loads(SAMCONFIG.read_text())


def _section(config: dict[str, Any], env: str, command: str) -> dict[str, Any]:
    section: dict[str, Any] = config.get(env, {}).get(command, {}).get("parameters", {})
    return section


def _overrides(raw: str | list[str]) -> dict[str, str]:
    """parameter_overrides as SAM reads them: a list of Key=Value, or one space-separated string."""
    items = raw if isinstance(raw, list) else raw.split()
    return dict(item.split("=", 1) for item in items)


def _pins(text: str) -> dict[str, str]:
    """name -> version of every `name==version` line (names normalized as PEP 503 does)."""
    return {name: pin.version for name, pin in requirement_pins(text).items()}


def test_samconfig_default_environment_builds_validates_and_deploys() -> None:
    # GIVEN samconfig.toml
    config = _samconfig()
    # THEN the default environment names the stack and region, builds cached and in parallel
    assert config["version"] == 0.1
    assert _section(config, "default", "global") == {
        "stack_name": "scrape-pipeline",
        "region": "us-east-1",
    }
    assert _section(config, "default", "build") == {"cached": True, "parallel": True}
    # AND deploys with IAM capability, a confirmed change set and a managed bucket
    deploy = _section(config, "default", "deploy")
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["confirm_changeset"] is True
    assert deploy["resolve_s3"] is True


@pytest.mark.parametrize("env", ["default", "prod"])
def test_samconfig_validate_runs_the_translator(env: str) -> None:
    # GIVEN an environment's validate section
    validate = _section(_samconfig(), env, "validate")
    # THEN it sets a region (sam validate needs one) and not lint, which would skip the
    # translator (field-notes.md)
    assert validate.get("region")
    assert "lint" not in validate


def test_samconfig_prod_is_its_own_stack_with_valid_overrides() -> None:
    # GIVEN the prod environment and the template's parameters
    config = _samconfig()
    parameters = load_template()["Parameters"]
    overrides = _overrides(_section(config, "prod", "deploy")["parameter_overrides"])
    # THEN prod deploys another stack, logging less
    prod_stack = _section(config, "prod", "global")["stack_name"]
    assert prod_stack
    assert prod_stack != _section(config, "default", "global")["stack_name"]
    assert overrides["LogLevel"] == "WARNING"
    # AND is the prod Environment, whose rule refuses a deploy until AlarmTopicArn is set
    assert overrides["Environment"] == "prod"
    assert _section(config, "prod", "deploy")["capabilities"] == "CAPABILITY_IAM"
    # AND every override names a template parameter with a value it allows
    for name, value in overrides.items():
        assert name in parameters, f"prod overrides unknown parameter {name}"
        allowed = parameters[name].get("AllowedValues")
        assert allowed is None or value in allowed, f"{name}={value} not in {allowed}"


def test_layer_requirements_pin_the_constrained_versions() -> None:
    # GIVEN what the layer names (its lock is checked in test_layer_lock.py) and the constraints
    layer = _pins(LAYER_INPUTS.read_text())
    constraints = _pins(CONSTRAINTS.read_text())
    # THEN the layer ships exactly Powertools and httpx (the runtime has boto3), at the
    # versions the tests run with
    assert set(layer) == {"aws-lambda-powertools", "httpx"}
    for name, version in layer.items():
        assert version == constraints[name], (
            f"{name}: layer {version}, constraints {constraints[name]}"
        )
