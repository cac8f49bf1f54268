"""What the audit and ``results get`` tests share: the simulator over HTTP on a manual clock,
a versioned results bucket in moto, and results written the way the processor writes them
(``ResultStore`` itself, from the job as the API answers it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import ResultStore, metadata_of
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.moto_server import forget_cached_clients
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from tests.cli.conftest import QUIET

KEY = "audit-cli-key"
BUCKET = "audit-results"
SETTLED = 86_400.0  # far past the simulator's longest job


@dataclass
class S3Calls:
    """Every S3 operation the CLI's clients made, counted by a botocore event hook."""

    counts: dict[str, int] = field(default_factory=dict)

    def __call__(self, event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        self.counts[operation] = self.counts.get(operation, 0) + 1

    def reset(self) -> None:
        self.counts.clear()


@dataclass
class World:
    """The simulator, its clock, the bucket and a way to store a job's result."""

    sim: SimulatorServer
    clock: ManualClock
    s3: Any
    store: ResultStore
    client: GeonodeClient
    s3_calls: S3Calls

    def submit(self, n: int, tag: str, formats: tuple[str, ...] = ("markdown",)) -> list[str]:
        """``n`` async extract jobs, straight into the simulator (no HTTP per job)."""
        return [
            self.sim.sim.submit_extract(KEY, f"https://example.com/{tag}/{i}", formats).job_id
            for i in range(n)
        ]

    def settle(self) -> None:
        self.clock.advance(SETTLED)

    def stored(self, job_ids: list[str]) -> None:
        """Each job's result as the processor stores it: GET over HTTP, then ResultStore."""
        for job_id in job_ids:
            job = self.client.get_job(job_id)
            self.store.store(JobKind.EXTRACT, job_id, job.data, metadata_of(job.raw))

    def since(self, back: float = 60.0) -> str:
        return format_time(self.clock.time() - back)

    def keys(self, prefix: str) -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    clock = ManualClock()
    config = SimConfig(**QUIET, api_keys=(KEY,), webhook_dispatcher=False, balance_tokens=None)
    server = SimulatorServer(config, clock).start()
    monkeypatch.setenv("GEONODE_BASE_URL", server.base_url)
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", KEY)
    monkeypatch.setenv("RESULTS_BUCKET", BUCKET)
    monkeypatch.delenv("LEDGER_TABLE_NAME", raising=False)
    with mock_aws():
        forget_cached_clients()
        boto3.setup_default_session()
        calls = S3Calls()
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("before-call.s3", calls)
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        client = GeonodeClient(KEY, base_url=server.base_url, clock=clock)
        try:
            yield World(server, clock, s3, ResultStore(BUCKET, client=s3), client, calls)
        finally:
            client.close()
            server.stop()
            forget_cached_clients()
