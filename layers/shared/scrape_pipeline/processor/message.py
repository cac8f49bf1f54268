"""A job queue message, ``{kind, job_id, source}`` (the processor fetches the real state), and
its one send: all the receiver needs of the queue (``queue`` reads messages back)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrape_pipeline.aws_errors import AWS_ERRORS, unavailable
from scrape_pipeline.jobs import JobKey, Source

if TYPE_CHECKING:
    from types_boto3_sqs.client import SQSClient

BATCH_MAX = 10  # SQS's cap on a batch's entries


@dataclass(frozen=True)
class JobMessage:
    """A queue message: which job, and who enqueued it (for the gap metrics)."""

    key: JobKey
    source: Source | str  # a label that is not a ``Source`` is kept as it came

    def to_json(self) -> str:
        """The message body."""
        return json.dumps(
            {"kind": self.key.kind.value, "job_id": self.key.job_id, "source": self.source},
            separators=(",", ":"),
        )


class JobSender:
    """Sends job messages to SQS (``queue.JobQueue`` also brings received ones back later)."""

    def __init__(self, queue_url: str, *, client: SQSClient) -> None:
        self.queue_url = queue_url
        self._sqs = client

    def send(self, message: JobMessage, *, delay_seconds: int = 0) -> str:
        """Enqueue one job; returns the SQS message id."""
        try:
            response = self._sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=message.to_json(),
                DelaySeconds=delay_seconds,
            )
        except AWS_ERRORS as exc:
            raise unavailable("sqs", "SendMessage", exc) from exc
        return response["MessageId"]
