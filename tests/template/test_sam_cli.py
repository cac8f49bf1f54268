"""The SAM CLI and cfn-lint accept template.yaml offline, and the translator catches typos.

cfn-lint (and so `sam validate --lint`) checks SAM properties against a schema but no longer
runs the SAM translator: some mistakes, such as a misspelt policy template name, pass it and
only plain `sam validate` catches them. So both run here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.template.helpers import REGION, SAM, TEMPLATE, describe, require_sam_tools, run


def test_sam_validate_translates_template() -> None:
    # GIVEN the SAM CLI from its tool environment
    require_sam_tools()
    # WHEN it validates the template with the translator, offline
    result = run([SAM, "validate", "--template", TEMPLATE, "--region", REGION])
    # THEN the template is valid
    assert result.returncode == 0, describe(result)
    assert "is a valid SAM Template" in result.stdout


def test_sam_validate_lint_accepts_template() -> None:
    # GIVEN the SAM CLI from its tool environment
    require_sam_tools()
    # WHEN it lints the template (cfn-lint inside the SAM CLI)
    result = run([SAM, "validate", "--lint", "--template", TEMPLATE, "--region", REGION])
    # THEN there is no finding
    assert result.returncode == 0, describe(result)


def test_cfn_lint_accepts_template() -> None:
    # GIVEN the app environment's cfn-lint (cfnlint has no __main__: use its script)
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    assert cfn_lint.is_file(), f"{cfn_lint} is missing: reinstall the app venv (make venv)"
    # WHEN it checks the template (warnings fail too)
    result = run([cfn_lint, "--", TEMPLATE])
    # THEN there is no finding
    assert result.returncode == 0, describe(result)


@pytest.mark.parametrize(
    ("written", "misspelt", "reported"),
    [
        # an Api property
        ("      BinaryMediaTypes: ", "      BinaryMediaTypez: ", "BinaryMediaTypez"),
        # an Api event property
        ("            RestApiId: ", "            RestApiIdz: ", "RestApiIdz"),
        # a policy template name: cfn-lint 1.58 (and so `sam validate --lint`) passes this one
        ("        - SQSSendMessagePolicy:", "        - SQSSendMessagePolicz:", "Policies"),
        # an SQS event property: cfn-lint 1.58 passes this one too (field-notes.md)
        (
            "            MaximumBatchingWindowInSeconds:",
            "            MaximumBatchingWindowInSecondz:",
            "MaximumBatchingWindowInSecondz",
        ),
    ],
    ids=["api-property", "api-event-property", "policy-template", "sqs-event-property"],
)
def test_sam_validate_rejects_misspelt_sam_property(
    tmp_path: Path, written: str, misspelt: str, reported: str
) -> None:
    # GIVEN a copy of the template with one SAM name misspelt
    require_sam_tools()
    text = TEMPLATE.read_text()
    assert text.count(written) == 1, f"{written!r} not found once in template.yaml"
    broken = tmp_path / "template.yaml"
    broken.write_text(text.replace(written, misspelt))
    # WHEN plain `sam validate` (the translator) checks it
    result = run([SAM, "validate", "--template", broken, "--region", REGION], cwd=tmp_path)
    # THEN it fails and says where
    assert result.returncode != 0, describe(result)
    assert "invalid SAM Template" in result.stdout, describe(result)
    assert reported in result.stderr, describe(result)
