"""The local moto server keeps connections alive, answers promptly, and ends them at stop."""

from __future__ import annotations

import socket

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from scrape_pipeline_local.moto_server import MotoServer

CALLS = 20


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
