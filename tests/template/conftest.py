"""Session fixtures for the template tests: the template as written and as SAM translates it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.template.helpers import Translation, load_template, translate, with_fake_code_uris


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    """template.yaml as written (intrinsics in long form)."""
    return load_template()


@pytest.fixture(scope="session")
def translation(template: dict[str, Any]) -> Translation:
    """template.yaml translated once per session by the translator `sam validate` uses."""
    return translate(with_fake_code_uris(template))


@pytest.fixture(scope="session")
def cfn(translation: Translation) -> dict[str, Any]:
    """The translated CloudFormation template."""
    return translation.template
