"""A job queue message, ``{kind, job_id, source}`` (the processor fetches the real state), and
its one send: all the receiver needs of the queue (``queue.JobQueue`` adds the rest)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWS_ERRORS, unavailable
from scrape_pipeline.jobs import JobKey, JobKind, Source, is_job_id

if TYPE_CHECKING:
    from types_boto3_sqs.client import SQSClient

_KINDS = tuple(kind.value for kind in JobKind)  # a tuple: any JSON value may be looked up
# Our sources are short words (webhook, job_list, watch, ...); a longer one is not ours.
MAX_SOURCE_CHARS = 64


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

    @classmethod
    def from_json(cls, body: object) -> JobMessage:
        """Read a message body; ``ValueError``, and nothing else, for any body not one of ours."""
        data = _json_object(body)
        job_id, kind = data.get("job_id"), data.get("kind")
        # The job id goes into DynamoDB keys, URL paths and logs: only the API's shape of id.
        if not is_job_id(job_id) or kind not in _KINDS:
            raise ValueError("not a job message: no valid kind and job id")
        source = _label(data.get("source", ""))
        return cls(JobKey(JobKind(kind), job_id), Source.read(source) or source)


def _json_object(body: object) -> dict[str, Any]:
    if not isinstance(body, str):
        raise ValueError("not a job message: no text body")
    try:
        data: Any = json.loads(body)
    except RecursionError:
        # Nesting deeper than the parser's stack: a body, not a fault of the handler.
        raise ValueError("not a job message: nested too deep") from None
    if not isinstance(data, dict):
        raise ValueError("not a job message: not a JSON object")
    return data


def _label(source: object) -> str:
    """A source label for logs and metrics only: one that is not ours is kept as nothing."""
    return source if isinstance(source, str) and len(source) <= MAX_SOURCE_CHARS else ""


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
