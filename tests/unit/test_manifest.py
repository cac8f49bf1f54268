"""The manifest's chain of parts in S3 (moto over boto3): each range once, read back by key.

An attempt that died between its part and its checkpoint leaves a part the next attempt
finds: shorter than the new range, the range goes on from its end; longer, it stands and the
checkpoint goes to its end. The manifest walks the chain with GetObject alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.geonode.models import BatchItem, BatchStatus
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.processor.manifest import (
    REASON_ITEM_FAILED,
    ItemRecord,
    ItemStatus,
    ManifestWriter,
    Part,
    manifest_key,
    part_key,
)
from scrape_pipeline.processor.results import ResultStore
from scrape_pipeline_local.create import create_bucket
from scrape_pipeline_local.resolve import Resolver
from scrape_pipeline_local.translate import only_resource, translate

BUCKET = "results"
KEY = JobKey(JobKind.CRAWL, "c-1")


@pytest.fixture
def s3() -> Iterator[Any]:
    """The results bucket in moto, versioned as the template says."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        # The template's bucket, versioned (its notifications need a queue: left out here).
        logical_id, resource = only_resource(translate(), "AWS::S3::Bucket")
        versioning = {"VersioningConfiguration": resource["Properties"]["VersioningConfiguration"]}
        create_bucket(client, logical_id, versioning, BUCKET, Resolver(translate()))
        yield client


def records(first: int, end: int, page: int = 1) -> list[ItemRecord]:
    base = (page - 1) * 50
    return [
        ItemRecord(base + i, f"https://example.com/{base + i}", ItemStatus.STORED, (f"k{i}",), 2)
        for i in range(first, end)
    ]


def part_at(s3: Any, page: int, first: int) -> Part:
    body = s3.get_object(Bucket=BUCKET, Key=part_key(KEY.kind, KEY.job_id, page, first))["Body"]
    return Part.from_json(json.loads(body.read()))


def status(**raw: Any) -> BatchStatus:
    return BatchStatus.from_api({"job_id": KEY.job_id, "status": "completed", **raw}, page=1)


def test_a_range_meeting_a_shorter_part_goes_on_from_its_end(s3: Any):
    # GIVEN an attempt that wrote the part of items 0-19 and died before its checkpoint
    writer = ManifestWriter(ResultStore(BUCKET, client=s3))
    writer.record_range(KEY, 1, 0, records(0, 20), page_items=50, last=False)

    # WHEN the retry stores items 0-34 from the same checkpoint
    covered = writer.record_range(KEY, 1, 0, records(0, 35), page_items=50, last=False)

    # THEN the first part stands and a second holds 20-34: the checkpoint goes to 35
    assert covered.end == 35 and [r.index for r in covered.records] == list(range(35))
    assert (part_at(s3, 1, 0).end, part_at(s3, 1, 20).end) == (20, 35)


def test_a_range_meeting_a_longer_part_stops_at_its_end_with_its_items(s3: Any):
    # GIVEN a dead attempt's part of items 0-39, and a retry with time for 0-24 only
    writer = ManifestWriter(ResultStore(BUCKET, client=s3))
    writer.record_range(KEY, 1, 0, records(0, 40), page_items=50, last=False)

    covered = writer.record_range(KEY, 1, 0, records(0, 25), page_items=50, last=False)

    # THEN the checkpoint goes to 40, counting the items the dead attempt stored
    assert covered.end == 40 and len(covered.records) == 40
    versions = s3.list_object_versions(Bucket=BUCKET)["Versions"]
    assert len(versions) == 1


def test_the_manifest_walks_the_chain_across_pages_each_item_once(s3: Any):
    # GIVEN page 1 in two ranges and a last page 2 of 10 items, one failed, one cancelled
    writer = ManifestWriter(ResultStore(BUCKET, client=s3))
    writer.record_range(KEY, 1, 0, records(0, 30), page_items=50, last=False)
    writer.record_range(KEY, 1, 30, records(30, 50), page_items=50, last=False)
    failed = BatchItem.from_api(
        {"input_index": 50, "url": "https://example.com/50", "status": "failed"}
    )
    cancelled = BatchItem.from_api({"url": "https://example.com/51", "status": "cancelled"})
    last_page = [
        ItemRecord.of(failed, 50, ItemStatus.DEAD_LETTERED, ["dead-letters/crawl/c-1/00050.json"]),
        ItemRecord.of(cancelled, 51, ItemStatus.CANCELLED),
        *records(2, 10, page=2),
    ]
    writer.record_range(KEY, 2, 0, last_page, page_items=10, last=True)

    # WHEN the manifest is written, twice (a retry after a crash before DONE)
    api = status(created_at="2026-12-02T10:00:00Z", token_summary={"tokens_charged_total": 116})
    where = writer.write(KEY, api)
    assert writer.write(KEY, status()) == where

    # THEN one version, each of the 60 items once in order, counted by status
    versions = [v for v in s3.list_object_versions(Bucket=BUCKET)["Versions"] if v["Key"] == where]
    assert where == manifest_key(KEY.kind, KEY.job_id) and len(versions) == 1
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=where)["Body"].read())
    assert [i["index"] for i in manifest["items"]] == list(range(60))
    assert manifest["counts"] == {"stored": 58, "dead_lettered": 1, "cancelled": 1, "total": 60}
    assert manifest["items"][50]["reason"] == REASON_ITEM_FAILED
    assert manifest["items"][50]["keys"] == ["dead-letters/crawl/c-1/00050.json"]
    assert manifest["items"][51]["keys"] == [] and "reason" not in manifest["items"][51]
    assert (manifest["tokens_total"], manifest["api_tokens_charged_total"]) == (116, 116)
    assert manifest["created_at"] == "2026-12-02T10:00:00Z"


def test_a_part_that_does_not_move_on_is_refused():
    with pytest.raises(ValueError, match="ends at"):
        Part.from_json({"page": 1, "first": 5, "end": 5, "page_end": False, "last": False})


def test_a_record_reads_back_as_written():
    record = ItemRecord(3, "https://example.com/3", ItemStatus.DEAD_LETTERED, ("d.json",), 4, "E")
    assert ItemRecord.from_json(record.to_json()) == record
    with pytest.raises(ValueError):
        ItemRecord.from_json({**record.to_json(), "status": "pending"})
