"""The runs tests use the simulator, its manual clock and a client on it as the client's own
integration tests start them (``clock``, ``server``, ``client``); the DynamoDB journal's, a
moto server on 127.0.0.1 and a fresh ledger table from template.yaml's definition each."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import boto3
import pytest

from tests.integration.test_client_simulator import client, clock, server
from tests.support.template import create_ledger_table, moto_server

__all__ = ["client", "clock", "server"]
_TABLES = itertools.count()


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    found, endpoint = moto_server()
    yield endpoint
    found.stop()


@pytest.fixture
def table(moto_endpoint: str) -> tuple[str, str]:
    """(the moto endpoint, the name of a ledger table made for this test)."""
    name = f"runs-{next(_TABLES)}"
    create_ledger_table(boto3.client("dynamodb", endpoint_url=moto_endpoint), name)
    return moto_endpoint, name
