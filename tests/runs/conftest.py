"""The runs tests use the simulator, its manual clock and a client on it as the client's own
integration tests start them (``clock``, ``server``, ``client``); the DynamoDB journal's, a
moto server on 127.0.0.1 and a fresh ledger table from template.yaml's definition each."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.journal import Journal
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
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


@contextlib.contextmanager
def journal_of(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    """A journal a submitter may keep: ``sqlite``, the file's; ``dynamodb``, the stack's (a
    fresh ledger table on the moto server on 127.0.0.1)."""
    if kind == "sqlite":
        opened = SqliteJournal(tmp_path / "journal.sqlite3")
        try:
            yield opened
        finally:
            opened.close()
        return
    endpoint, name = request.getfixturevalue("table")
    yield DynamoJournal(name, client=boto3.client("dynamodb", endpoint_url=endpoint))
