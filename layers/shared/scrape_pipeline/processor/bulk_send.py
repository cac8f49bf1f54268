"""Job messages sent ten to a call: the reconciler's recoveries (the processor sends one by one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSUnavailableError, unavailable
from scrape_pipeline.processor.message import BATCH_MAX, JobMessage, JobSender

if TYPE_CHECKING:
    from types_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef


class UnsentError(AWSUnavailableError):
    """Some messages of a ``send_many`` were not sent, even on a second try: ``unsent``."""

    def __init__(self, unsent: Sequence[JobMessage]) -> None:
        super().__init__("sqs", "SendMessageBatch", f"{len(unsent)} entries failed twice")
        self.unsent = list(unsent)


class BulkSender(JobSender):
    """Sends job messages to SQS one by one or ten to a SendMessageBatch call."""

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
