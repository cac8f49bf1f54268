"""Suite-wide fixtures: a clean, offline AWS environment for every test."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from scrape_pipeline_local import moto_server
from scrape_pipeline_local.moto_server import forget_cached_clients

OFFLINE_AWS_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    # Powertools raises on flush without a namespace, tests included (field-notes.md).
    "POWERTOOLS_METRICS_NAMESPACE": "ScrapePipelineTest",
    "POWERTOOLS_SERVICE_NAME": "test",
    "POWERTOOLS_DEV": "false",
}


# Handlers build their Logger and Metrics at import, as in Lambda: the environment must be
# there before any test module imports one.
for _name in ("POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_SERVICE_NAME"):
    os.environ.setdefault(_name, OFFLINE_AWS_ENV[_name])
# `submit` keeps a run journal in the user's state folder unless told otherwise: no test
# writes there, not even one run from a module-scoped fixture (tests/cli give each test its own).
os.environ["SCRAPE_PIPELINE_JOURNAL"] = os.path.join(
    tempfile.mkdtemp(prefix="scrape-pipeline-runs-"), "runs.sqlite3"
)

# The suite's boto3 calls reach a moto server of this process without the socket: the same
# dispatch under the same lock, a third less CPU a call. Tests marked `moto_http` (the transport
# itself) go over HTTP; so do other processes (the CLI run as a command).
moto_server.DIRECT_CALLS_DEFAULT = True


@pytest.fixture(autouse=True)
def moto_over_http(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked ``moto_http`` talks to its moto servers over HTTP, as other processes do."""
    if request.node.get_closest_marker("moto_http") is not None:
        monkeypatch.setattr(moto_server, "DIRECT_CALLS_DEFAULT", False)


@pytest.fixture(autouse=True)
def offline_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reaches real AWS or reads the developer's credentials."""
    for name, value in OFFLINE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "GEONODE_SCRAPER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    forget_cached_clients()
    yield
    forget_cached_clients()
