"""The demo's check of large results: read back from S3, compared with what the simulator served."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline_local.large_results import DELIVERY_LOG, JOB_LIST, WEBHOOK, measure, way_in
from scrape_pipeline_local.simulator import content

BUCKET = "results"
SIZE = 600_000


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def job(job_id: str, size: int = SIZE) -> dict[str, Any]:
    url = f"https://large.example/{job_id}"
    return {"kind": "extract", "job_id": job_id, "url": url, "formats": ["markdown"],
            "content_bytes": size}  # fmt: skip


def attempt(job_id: str, status: int | None) -> dict[str, Any]:
    return {"event_type": "extract_completed", "job_id": job_id, "http_status": status}


def put_page(s3: Any, row: dict[str, Any], *, cut: int = 0) -> str:
    prefix = f"results/extract/{row['job_id']}"
    page = content.extract(row["url"], ("markdown",), row["content_bytes"])["markdown"]
    body = str(page).encode()
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/content.md", Body=body[: len(body) - cut])
    return prefix


def test_large_results_way_in_from_the_senders_answers():
    assert way_in([413, 503, 200]) == WEBHOOK
    assert way_in([413, 413, None]) == DELIVERY_LOG
    assert way_in([]) == JOB_LIST


def test_large_results_compares_every_byte_and_counts_the_ways_in(s3: Any):
    # GIVEN three large pages stored whole, one stored short, and a small one
    rows = [job("by-hook"), job("refused"), job("dropped"), job("short"), job("small", 1000)]
    stored = [(put_page(s3, r, cut=1 if r["job_id"] == "short" else 0), r) for r in rows]
    attempts = [
        attempt("by-hook", 200),
        attempt("refused", 413),
        attempt("refused", 413),
        attempt("short", 200),
    ]
    # WHEN the run's large results are measured
    found = measure(s3, BUCKET, stored, attempts)
    # THEN the short one is caught, the small one ignored, and each way in counted
    assert (found.stored, found.exact, found.mismatched) == (4, 3, ["results/extract/short"])
    assert found.paths == {WEBHOOK: 2, DELIVERY_LOG: 1, JOB_LIST: 1}
    assert found.refused == 1
    assert found.largest_bytes == SIZE
