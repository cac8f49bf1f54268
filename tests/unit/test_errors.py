"""One error tree: every public error of the runtime is a PipelineError, botocore's translated."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)

import scrape_pipeline
from scrape_pipeline import errors
from scrape_pipeline.aws_errors import AWSError, AWSUnavailableError, unavailable
from scrape_pipeline.errors import PipelineError
from scrape_pipeline_ops.aws_translate import AWSConfigurationError, translate


def _public_errors() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(scrape_pipeline.__path__, "scrape_pipeline."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_error_of_the_runtime_is_in_the_tree():
    # GIVEN every exception class the runtime package defines
    found = _public_errors()
    # THEN each one descends from the root, so callers can catch the package's errors at once
    assert found, "no error classes found: the walk is broken"
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, PipelineError))
    assert outside == []


def test_every_error_is_drawn_in_the_tree_docstring():
    # GIVEN the tree drawn in scrape_pipeline.errors THEN it names every public error
    doc = errors.__doc__ or ""
    geonode = "scrape_pipeline.geonode.errors."  # that tree is drawn in its own module
    missing = sorted(
        name
        for name in _public_errors()
        if not name.startswith(geonode) and name.rsplit(".", 1)[1] not in doc
    )
    assert missing == []


def _client_error(code: str, message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Scan")


def test_translate_client_error_keeps_operation_code_and_message():
    exc = translate(_client_error("ResourceNotFoundException", "Requested resource not found"))
    assert isinstance(exc, AWSUnavailableError)
    assert (exc.operation, exc.code) == ("Scan", "ResourceNotFoundException")
    assert str(exc) == "AWS Scan failed: ResourceNotFoundException: Requested resource not found"


@pytest.mark.parametrize("exc", [NoRegionError(), NoCredentialsError()])
def test_translate_missing_region_or_credentials_is_configuration(exc: Exception):
    translated = translate(exc)  # type: ignore[arg-type]
    assert isinstance(translated, AWSConfigurationError)
    assert str(translated).startswith("AWS configuration: ")


def test_translate_network_failure_is_unavailable():
    translated = translate(EndpointConnectionError(endpoint_url="http://localhost:1"))
    assert isinstance(translated, AWSUnavailableError)
    assert translated.code == "EndpointConnectionError"
    assert "cannot reach localhost:1" in str(translated)


def test_unavailable_keeps_aws_message_out():
    # The Lambdas log this one: the code, never AWS's free text.
    exc = unavailable("dynamodb", "PutItem", _client_error("ThrottlingException", "slow down"))
    assert str(exc) == "dynamodb PutItem failed: ThrottlingException"
    assert isinstance(exc, AWSError)
