"""The local moto server keeps connections alive, answers promptly, and ends them at stop."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from scrape_pipeline_local.moto_server import MotoServer

pytestmark = pytest.mark.moto_http  # the transport is what these tests test

CALLS = 20
LONG_POLL_S = 6


def test_calls_reuse_one_connection_without_waiting_and_stop_ends_it():
    server = MotoServer().start()
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 1}),
        )
        s3.create_bucket(Bucket="bucket")
        s3.put_object(Bucket="bucket", Key="warm", Body=b"x")  # 100 Continue answered at once
        for i in range(CALLS):
            s3.put_object(Bucket="bucket", Key=f"k{i}", Body=b"x" * 1000)
        assert server._server is not None
        (connection,) = server._server.connections  # every call on one connection
        # Without it a kept-alive response waited for the client's delayed ACK (~40 ms a call).
        assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.stop()
    # A connection kept alive must not go on reaching moto once its server has stopped.
    with pytest.raises(EndpointConnectionError):
        s3.head_bucket(Bucket="bucket")


def test_an_sqs_long_poll_holds_no_other_call_and_returns_a_message_sent_meanwhile():
    # GIVEN a long poll waiting on an empty queue (as `events tail` does against `local up`)
    server = MotoServer().start()
    try:
        sqs = boto3.client("sqs", endpoint_url=server.endpoint, region_name="us-east-1")
        url = sqs.create_queue(QueueName="tail")["QueueUrl"]
        got: list[Any] = []
        poll = threading.Thread(
            target=lambda: got.append(
                sqs.receive_message(QueueUrl=url, WaitTimeSeconds=LONG_POLL_S)
            )
        )
        started = time.monotonic()
        poll.start()
        time.sleep(0.3)  # the poll is waiting (a real server, real time)
        # WHEN another client calls meanwhile
        other = boto3.client("sqs", endpoint_url=server.endpoint, region_name="us-east-1")
        other.send_message(QueueUrl=url, MessageBody="late")
        answered_within = time.monotonic() - started
        poll.join(timeout=LONG_POLL_S + 5)
    finally:
        server.stop()
    # THEN that call was not held for the poll's wait, and the poll returned its message
    assert answered_within < LONG_POLL_S / 2
    (answer,) = got
    assert [m["Body"] for m in answer["Messages"]] == ["late"]
    assert time.monotonic() - started < LONG_POLL_S
