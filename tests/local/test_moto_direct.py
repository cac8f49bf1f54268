"""moto answering this process's own calls without the socket, and the stack's cheap looks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import boto3
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.moto_server import MotoServer

KEYS = ("plain", "with space/and+plus", "ünï/cödé?x=1&y", "a%2Fb")


@pytest.fixture
def server() -> Iterator[tuple[MotoServer, ManualClock]]:
    clock = ManualClock()
    server = MotoServer(clock=clock, direct=True).start()
    server.reset()  # moto's backends are per process, not per server
    try:
        yield server, clock
    finally:
        server.stop()


def test_direct_calls_round_trip_awkward_keys_and_bytes_without_a_connection(
    server: tuple[MotoServer, ManualClock],
):
    moto, _ = server
    s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bucket")
    for i, key in enumerate(KEYS):
        s3.put_object(Bucket="bucket", Key=key, Body=bytes(range(256)) * (i + 1))
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket="bucket")["Contents"]]
    assert sorted(listed) == sorted(KEYS)
    for i, key in enumerate(KEYS):
        assert s3.get_object(Bucket="bucket", Key=key)["Body"].read() == bytes(range(256)) * (i + 1)
        assert s3.head_object(Bucket="bucket", Key=key)["ContentLength"] == 256 * (i + 1)
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="bucket", Key="absent")
    assert moto._server is not None and not moto._server.connections  # no socket was used


def test_object_versions_counts_what_list_object_versions_counts(
    server: tuple[MotoServer, ManualClock],
):
    moto, _ = server
    s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bucket")
    s3.put_bucket_versioning(Bucket="bucket", VersioningConfiguration={"Status": "Enabled"})
    for key in ("twice", "twice", "once", "deleted"):
        s3.put_object(Bucket="bucket", Key=key, Body=b"x")
    s3.delete_object(Bucket="bucket", Key="deleted")  # a delete marker is not a version
    listed: Counter[str] = Counter()
    for page in s3.get_paginator("list_object_versions").paginate(Bucket="bucket"):
        listed.update(v["Key"] for v in page.get("Versions", []))
    assert moto.object_versions("bucket") == listed == {"twice": 2, "once": 1, "deleted": 1}


def test_may_receive_follows_visibility_on_the_clock(server: tuple[MotoServer, ManualClock]):
    moto, clock = server
    sqs = boto3.client("sqs", endpoint_url=moto.endpoint, region_name="us-east-1")
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    assert not moto.may_receive(url)
    sqs.send_message(QueueUrl=url, MessageBody="m")
    assert moto.may_receive(url)
    assert sqs.receive_message(QueueUrl=url)["Messages"]
    assert not moto.may_receive(url)  # in flight
    clock.advance(31)
    assert moto.may_receive(url)  # visible again after its visibility timeout
    assert moto.may_receive(url.replace("/q", "/no-such-queue"))  # unknown: let SQS answer
