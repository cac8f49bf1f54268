"""The job queue: sends in batches, and brings received messages back later or acknowledges them
(``message`` has the message and the one send the receiver uses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSUnavailableError, unavailable
from scrape_pipeline.processor.message import MAX_SOURCE_CHARS, JobMessage, JobSender

if TYPE_CHECKING:
    from types_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

# The message is ``message``'s; callers import it from here too.
__all__ = ["BATCH_MAX", "MAX_SOURCE_CHARS", "JobMessage", "JobQueue", "UnsentError"]


class UnsentError(AWSUnavailableError):
    """Some messages of a ``send_many`` were not sent, even on a second try: ``unsent``."""

    def __init__(self, unsent: Sequence[JobMessage]) -> None:
        super().__init__("sqs", "SendMessageBatch", f"{len(unsent)} entries failed twice")
        self.unsent = list(unsent)


MAX_DELAY_SECONDS = 900  # SQS's cap on DelaySeconds
BATCH_MAX = 10  # SQS's cap on a batch's entries


class JobQueue(JobSender):
    """Sends job messages to SQS, and brings received ones back later."""

    def send_many(self, messages: Sequence[JobMessage]) -> None:
        """Enqueue jobs ten to a SendMessageBatch call; those that failed are sent once more, and
        those that fail again raise ``UnsentError`` naming them, after every other."""
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
