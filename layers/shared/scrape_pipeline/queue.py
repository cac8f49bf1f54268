"""The job queue: messages carry only ``{kind, job_id}``; the processor fetches the real state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSUnavailableError, unavailable
from scrape_pipeline.jobs import JobKey, JobKind, Source, is_job_id

if TYPE_CHECKING:
    from types_boto3_sqs.client import SQSClient
    from types_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

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


class UnsentError(AWSUnavailableError):
    """Some messages of a ``send_many`` were not sent, even on a second try: ``unsent``."""

    def __init__(self, unsent: Sequence[JobMessage]) -> None:
        super().__init__("sqs", "SendMessageBatch", f"{len(unsent)} entries failed twice")
        self.unsent = list(unsent)


MAX_DELAY_SECONDS = 900  # SQS's cap on DelaySeconds
BATCH_MAX = 10  # SQS's cap on a batch's entries


class JobQueue:
    """Sends job messages to SQS, and brings received ones back later."""

    def __init__(self, queue_url: str, *, client: SQSClient | None = None) -> None:
        if client is None:
            import boto3  # noqa: PLC0415 - only when no client is injected

            client = boto3.client("sqs")
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

    def send_many(self, messages: Sequence[JobMessage]) -> None:
        """Enqueue jobs ten to a SendMessageBatch call; the entries that failed are sent once
        more, and those that fail again raise ``UnsentError`` naming them, after every other."""
        failed = self._send_chunks(messages)
        still = self._send_chunks(failed)
        if still:
            raise UnsentError(still)

    def _send_chunks(self, messages: Sequence[JobMessage]) -> list[JobMessage]:
        """Every message, ten to a call; returns those not sent (a whole call may fail)."""
        failed: list[JobMessage] = []
        for start in range(0, len(messages), BATCH_MAX):
            chunk = messages[start : start + BATCH_MAX]
            try:
                failed.extend(self._send_batch(chunk))
            except AWSUnavailableError:
                failed.extend(chunk)
        return failed

    def _send_batch(self, batch: Sequence[JobMessage]) -> list[JobMessage]:
        """One SendMessageBatch call; returns the messages SQS reported failed."""
        entries: list[SendMessageBatchRequestEntryTypeDef] = [
            {"Id": str(index), "MessageBody": message.to_json()}
            for index, message in enumerate(batch)
        ]
        try:
            response = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except AWS_ERRORS as exc:
            raise unavailable("sqs", "SendMessageBatch", exc) from exc
        return [batch[int(entry["Id"])] for entry in response.get("Failed", [])]

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
        """Make a received message come back in ``seconds`` (its visibility); near the redrive
        limit, which would move a healthy job to the DLQ, a delayed copy is sent instead (True)."""
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
