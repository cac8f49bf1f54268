"""The DynamoDB journal passes the journal contract, against a moto server on 127.0.0.1, in a
ledger table made from template.yaml's own definition; the ledger's scans never see it."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.journal import Journal
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline_ops.ledger import Ledger
from tests.runs.journal_contract import NOW, JournalContract


class TestDynamoJournal(JournalContract):
    born_announced = True

    @pytest.fixture
    def make_journal(self, table: tuple[str, str]) -> Any:
        endpoint, name = table

        def make(**kwargs: Any) -> Journal:
            client = boto3.client("dynamodb", endpoint_url=endpoint)
            return DynamoJournal(name, client=client, **kwargs)

        return make


def test_dynamo_journal_is_invisible_to_the_ledger_scans(table: tuple[str, str]):
    # GIVEN a planned run in the ledger's table
    endpoint, name = table
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    journal = DynamoJournal(name, client=client)
    urls = tuple(f"https://example.com/scan/{i}" for i in range(3))
    journal.plan(RunSpec.of(urls, RunMode.ASYNC), "scanned", NOW)
    # THEN the ledger counts no job row for it, and its items carry the TTL
    ledger = Ledger(name, client=client)
    assert ledger.count_rows().jobs == 0
    assert list(ledger.job_keys()) == []
    items = client.scan(TableName=name)["Items"]
    assert len(items) == 4 and all("expires_at" in item for item in items)


def test_dynamo_journal_finishes_a_plan_its_planner_left_half_done(table: tuple[str, str]):
    # GIVEN a head written and one entry of three, as a planner killed mid-plan leaves them
    endpoint, name = table
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    journal = DynamoJournal(name, client=client)
    urls = tuple(f"https://example.com/half/{i}" for i in range(3))
    spec = RunSpec.of(urls, RunMode.ASYNC)
    journal.plan(spec, "half", NOW)
    client.delete_item(TableName=name, Key={"pk": {"S": "run#half#1"}})
    client.delete_item(TableName=name, Key={"pk": {"S": "run#half#2"}})
    client.update_item(
        TableName=name,
        Key={"pk": {"S": "run#half"}},
        UpdateExpression="SET planned = :f",
        ExpressionAttributeValues={":f": {"BOOL": False}},
    )
    first = journal.entries("half")[0]
    journal.claim(first, "a", NOW)
    # WHEN the run is planned again
    _, created = journal.plan(spec, "half", NOW + 1)
    # THEN the missing entries are there, and the claimed one was left as it was
    assert not created
    entries = journal.entries("half")
    assert [e.urls for e in entries] == [(u,) for u in urls]
    assert entries[0].owner == "a"
