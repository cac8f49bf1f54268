"""Builders of real Lambda event shapes: API Gateway REST proxy events and SQS batches."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types_boto3_sqs.type_defs import MessageTypeDef


def api_gateway_event(
    body: bytes,
    headers: Mapping[str, str],
    *,
    path: str = "/webhooks/geonode",
    method: str = "POST",
    base64_encoded: bool = True,
    stage: str = "v1",
) -> dict[str, Any]:
    """A REST API (v1) proxy event as API Gateway sends it with binary media types ``*/*``."""
    provider = path.rsplit("/", 1)[-1]
    return {
        "resource": "/webhooks/{provider}",
        "path": path,
        "httpMethod": method,
        "headers": dict(headers),
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"provider": provider},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/webhooks/{provider}",
            "httpMethod": method,
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "accountId": "123456789012",
            "apiId": "abcdef1234",
            "identity": {"sourceIp": "203.0.113.10", "userAgent": headers.get("User-Agent", "")},
            "protocol": "HTTP/1.1",
            "requestTimeEpoch": 1_800_000_000_000,
        },
        "body": base64.b64encode(body).decode() if base64_encoded else body.decode("utf-8"),
        "isBase64Encoded": base64_encoded,
    }


def sqs_event(
    bodies: Iterable[str],
    *,
    queue_arn: str = "arn:aws:sqs:us-east-1:123456789012:jobs",
    receipts: Iterable[tuple[str, str, int]] | None = None,
) -> dict[str, Any]:
    """An SQS batch as the Lambda event source mapping delivers it.

    ``receipts``: (message id, receipt handle, receive count) per body, from a real queue.
    """
    records = []
    real = list(receipts) if receipts is not None else None
    for index, body in enumerate(bodies):
        message_id, handle, count = (
            real[index] if real is not None else (str(uuid.uuid4()), f"handle-{index}", 1)
        )
        records.append(
            {
                "messageId": message_id,
                "receiptHandle": handle,
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": str(count),
                    "SentTimestamp": "1800000000000",
                    "SenderId": "AIDAEXAMPLE",
                    "ApproximateFirstReceiveTimestamp": "1800000000000",
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            }
        )
    return {"Records": records}


def sqs_event_of(messages: Sequence[MessageTypeDef]) -> dict[str, Any]:
    """The event Lambda sends for ``messages`` as ``ReceiveMessage`` returned them."""
    return sqs_event(
        [m["Body"] for m in messages],
        receipts=[
            (
                m["MessageId"],
                m["ReceiptHandle"],
                int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
            )
            for m in messages
        ],
    )


def response_json(response: Mapping[str, Any]) -> Any:
    """The JSON body of a proxy response."""
    body = response["body"]
    if response.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    return json.loads(body)
