"""Stand-ins for the receiver and the processor at rates moto cannot carry end to end."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from scrape_pipeline.jobs import SOURCE_WEBHOOK, JobKey, JobState, Outcome
from scrape_pipeline.ledger import PARTITION_KEY, STATE_SINCE, TTL_ATTRIBUTE, Ledger
from scrape_pipeline.queue import JobMessage

BATCH_WRITE_MAX = 25  # DynamoDB's limit of items per BatchWriteItem


def done_item(key: JobKey, now: float, *, source: str, ttl_seconds: int) -> dict[str, Any]:
    """The row of a job stored at ``now``: what the receiver's put and the processor's lease
    and finish leave behind (``Ledger.record``, ``acquire``, ``finish``)."""
    number = {"N": repr(now)}
    return {
        PARTITION_KEY: {"S": key.pk},
        "kind": {"S": key.kind.value},
        "job_id": {"S": key.job_id},
        "state": {"S": JobState.DONE.value},
        STATE_SINCE: number,
        "created_at": number,
        "updated_at": number,
        "finished_at": number,
        TTL_ATTRIBUTE: {"N": str(int(now) + ttl_seconds)},
        "source": {"S": source},
        "token": {"S": uuid.uuid4().hex},
        "attempts": {"N": "1"},
        "strikes": {"N": "0"},
        "outcome": {"S": Outcome.STORED.value},
        "detail": {"M": {}},
    }


def store(ledger: Ledger, keys: Sequence[JobKey], *, source: str) -> None:
    """Write ``keys`` as stored now, 25 rows a call."""
    now = ledger.clock.time()
    items = [done_item(key, now, source=source, ttl_seconds=ledger.ttl_seconds) for key in keys]
    for start in range(0, len(items), BATCH_WRITE_MAX):
        request = {
            ledger.table_name: [
                {"PutRequest": {"Item": item}} for item in items[start : start + BATCH_WRITE_MAX]
            ]
        }
        while request:
            response = ledger.client.batch_write_item(RequestItems=request)  # type: ignore[arg-type]
            request = response.get("UnprocessedItems") or {}  # type: ignore[assignment]


def receive(ledger: Ledger, keys: Sequence[JobKey]) -> None:
    """Webhooks that arrived: each job recorded by the receiver and stored by the processor."""
    store(ledger, keys, source=SOURCE_WEBHOOK)


def processor(ledger: Ledger) -> Any:
    """A processor handler that stores every job of its SQS batch."""

    def handle(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        messages = [JobMessage.from_json(record["body"]) for record in event["Records"]]
        by_source: dict[str, list[JobKey]] = {}
        for message in messages:
            by_source.setdefault(message.source, []).append(message.key)
        for source, keys in by_source.items():
            store(ledger, keys, source=source)
        return {"batchItemFailures": []}

    return handle
