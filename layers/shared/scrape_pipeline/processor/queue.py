"""The processor's side of the job queue: messages read (``read_message``), acknowledged, or
brought back later (``message`` has the message and the one send the receiver uses)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from scrape_pipeline.aws_errors import AWS_ERRORS, unavailable
from scrape_pipeline.jobs import JobKey, JobKind, Source, is_job_id
from scrape_pipeline.processor.message import BATCH_MAX, JobMessage, JobSender

_KINDS = tuple(kind.value for kind in JobKind)  # a tuple: any JSON value may be looked up
# Our sources are short words (webhook, job_list, watch, ...); a longer one is not ours.
MAX_SOURCE_CHARS = 64
MAX_DELAY_SECONDS = 900  # SQS's cap on DelaySeconds
# The message is ``message``'s; callers import it from here too.
__all__ = ["BATCH_MAX", "MAX_SOURCE_CHARS", "JobMessage", "JobQueue", "read_message"]


def read_message(body: object) -> JobMessage:
    """Read a message body; ``ValueError``, and nothing else, for any body not one of ours."""
    data = _json_object(body)
    job_id, kind = data.get("job_id"), data.get("kind")
    # The job id goes into DynamoDB keys, URL paths and logs: only the API's shape of id.
    if not is_job_id(job_id) or kind not in _KINDS:
        raise ValueError("not a job message: no valid kind and job id")
    source = _label(data.get("source", ""))
    return JobMessage(JobKey(JobKind(kind), job_id), Source.read(source) or source)


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


class JobQueue(JobSender):
    """Sends job messages to SQS, and brings received ones back later."""

    def acknowledge(self, receipt_handles: Sequence[str]) -> None:
        """Delete received messages now, ten a DeleteMessageBatch (an unknown handle is skipped)."""
        for start in range(0, len(receipt_handles), BATCH_MAX):
            chunk = receipt_handles[start : start + BATCH_MAX]
            try:
                self._sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chunk)],
                )
            except AWS_ERRORS as exc:
                raise unavailable("sqs", "DeleteMessageBatch", exc) from exc

    def retry_later(
        self,
        message: JobMessage,
        *,
        receipt_handle: str,
        seconds: int,
        receive_count: int,
        max_receive_count: int,
    ) -> bool:
        """Make a received message come back in ``seconds``; near the redrive limit, which would
        move a healthy job to the DLQ, a delayed copy is sent instead (True)."""
        if receive_count + 1 >= max_receive_count:
            self.send(message, delay_seconds=min(seconds, MAX_DELAY_SECONDS))
            return True
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
            )
        except AWS_ERRORS as exc:
            raise unavailable("sqs", "ChangeMessageVisibility", exc) from exc
        return False
