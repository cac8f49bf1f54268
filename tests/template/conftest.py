"""Session fixtures for the template tests: the template as written and as SAM translates it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scrape_pipeline_local.translate import template as written
from scrape_pipeline_local.translate import translate


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    """template.yaml as written (intrinsics in long form)."""
    return copy.deepcopy(written())


@pytest.fixture(scope="session")
def cfn() -> dict[str, Any]:
    """template.yaml translated once per session, offline, as `sam validate` does (fake code
    URIs, parameters at their defaults; a managed-policy name the translator would look up in
    IAM fails the translation)."""
    return translate()
