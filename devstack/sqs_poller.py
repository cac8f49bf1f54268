"""The SQS event source mapping, stood in: receive batches, call the handler, honour its answer.

As Lambda's poller does: messages reported in ``batchItemFailures`` stay on the queue (with
whatever visibility the handler gave them), the rest are deleted; a handler that raises
leaves the whole batch to come back after the visibility timeout. moto's redrive moves a
message received too often to the DLQ.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devstack.apigw import LambdaContext
from devstack.events import sqs_event

if TYPE_CHECKING:
    from types_boto3_sqs.client import SQSClient

Handler = Callable[[dict[str, Any], Any], Any]


class SqsEventSource:
    """Feeds a queue's messages to a handler in batches."""

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        handler: Handler,
        *,
        batch_size: int = 10,
        function_name: str = "processor",
    ) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self._handler = handler
        self.batch_size = batch_size
        self._context = LambdaContext(function_name)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches = 0
        self.handler_errors = 0

    def poll_once(self) -> int:
        """Receive one batch and process it; returns how many messages it held."""
        messages = self._sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not messages:
            return 0
        event = sqs_event(
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
        self.batches += 1
        try:
            response = self._handler(event, self._context) or {}
        except Exception:  # noqa: BLE001 - like Lambda: the whole batch comes back later
            self.handler_errors += 1
            return len(messages)
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self._sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + 10])
                ],
            )
        return len(messages)

    def drain(self, max_batches: int = 10_000) -> int:
        """Process batches until none is visible; returns the messages handled."""
        handled = 0
        for _ in range(max_batches):
            count = self.poll_once()
            if count == 0:
                break
            handled += count
        return handled

    def start(self, idle_sleep: float = 0.05) -> None:
        """Poll in a background thread until ``stop``."""

        def loop() -> None:
            while not self._stop.is_set():
                if self.poll_once() == 0:
                    time.sleep(idle_sleep)

        self._thread = threading.Thread(target=loop, name="sqs-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
