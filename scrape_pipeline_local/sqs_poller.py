"""The SQS event source mapping, stood in: gather batches, call the handler, honour its answer.

As Lambda's poller does: messages are gathered until the batch holds ``batch_size`` of them,
its event would pass the 6 MB invocation payload, or ``batching_window_seconds`` (on the
clock) have passed since its first message was received; received messages stay invisible
meanwhile (their visibility timeout runs from receipt). Messages reported in
``batchItemFailures`` stay on the queue (with whatever visibility the handler gave them), the
rest are deleted; a handler that raises or runs past its timeout leaves the whole batch to
come back after the visibility timeout. moto's redrive moves a message received too often to
the DLQ.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline_local.aws_calls import EVENT_SOURCE, acting_as
from scrape_pipeline_local.events import sqs_event_of as _event
from scrape_pipeline_local.lambda_runtime import (
    LAMBDA_DEFAULT_TIMEOUT_SECONDS,
    Handler,
    RunsAFunction,
    TimedInvoker,
)
from scrape_pipeline_local.limits import LAMBDA_SYNC_MAX_PAYLOAD_BYTES, event_bytes

if TYPE_CHECKING:
    from types_boto3_sqs.client import SQSClient
    from types_boto3_sqs.type_defs import MessageTypeDef

# Lambda's default BatchSize for an SQS source; also the most one ReceiveMessage returns and
# one DeleteMessageBatch takes.
DEFAULT_BATCH_SIZE = 10
_SQS_MAX_PER_CALL = 10


class BatchTooLarge(Exception):
    """One message alone makes an event over Lambda's invocation payload quota."""


class SqsEventSource(RunsAFunction):
    """Feeds a queue's messages to a handler in batches."""

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        handler: Handler,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batching_window_seconds: float = 0.0,
        timeout_seconds: float = LAMBDA_DEFAULT_TIMEOUT_SECONDS,
        clock: Clock = SYSTEM_CLOCK,
        function_name: str = "processor",
        may_receive: Callable[[], bool] | None = None,
    ) -> None:
        if batch_size < 1 or batching_window_seconds < 0:
            raise ValueError("batch_size must be positive and the window not negative")
        self._sqs = sqs
        self.queue_url = queue_url
        self._invoker = TimedInvoker(handler, function_name, timeout_seconds)
        self.batch_size = batch_size
        self.batching_window_seconds = batching_window_seconds
        self._clock = clock
        # A cheap look whether a receive could return anything (None: always receive).
        self._may_receive = may_receive
        self._held: list[MessageTypeDef] = []
        self._window_opened = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches = 0
        self.handler_errors = 0

    @property
    def held(self) -> int:
        """Messages received and waiting for their batch to be invoked."""
        return len(self._held)

    @property
    def flush_at(self) -> float | None:
        """When the batch being gathered is invoked at the latest (None: nothing held)."""
        return self._window_opened + self.batching_window_seconds if self._held else None

    def poll_once(self) -> int:
        """Gather, and invoke the batch if it is due; returns how many messages it held (0: none
        invoked)."""
        # Lambda's poller receives and deletes with the function's role.
        with acting_as(self._invoker.function_name, EVENT_SOURCE):
            self._gather()
            if not self._held or not self._due():
                return 0
            batch = self._take_batch()
            self._invoke(batch)
            return len(batch)

    def _gather(self) -> None:
        while len(self._held) < self.batch_size:
            if self._may_receive is not None and not self._may_receive():
                return
            messages = self._sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(_SQS_MAX_PER_CALL, self.batch_size - len(self._held)),
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
                WaitTimeSeconds=0,
            ).get("Messages", [])
            if not messages:
                return
            if not self._held:
                self._window_opened = self._clock.time()
            self._hold(messages)

    def _hold(self, messages: list[MessageTypeDef]) -> None:
        """Add received messages to the batch; one held already replaces its held copy.

        A clock stepped past both the window and the visibility timeout finds held messages
        visible again: received twice, they would be invoked twice in one batch (Lambda invokes
        at the window's end, long before). The newest copy has the receipt handle that counts.
        """
        place = {message["MessageId"]: i for i, message in enumerate(self._held)}
        for message in messages:
            i = place.get(message["MessageId"])
            if i is None:
                place[message["MessageId"]] = len(self._held)
                self._held.append(message)
            else:
                self._held[i] = message

    def _due(self) -> bool:
        full = len(self._held) >= self.batch_size
        window_passed = self._clock.time() >= self._window_opened + self.batching_window_seconds
        return (
            full or window_passed or event_bytes(_event(self._held)) > LAMBDA_SYNC_MAX_PAYLOAD_BYTES
        )

    def _take_batch(self) -> list[MessageTypeDef]:
        """The held messages whose event fits the payload quota, oldest first; the rest stay."""
        count = len(self._held)
        while count > 0 and event_bytes(_event(self._held[:count])) > LAMBDA_SYNC_MAX_PAYLOAD_BYTES:
            count -= 1
        if count == 0:
            message_id = self._held[0]["MessageId"]
            raise BatchTooLarge(f"{message_id} alone is over {LAMBDA_SYNC_MAX_PAYLOAD_BYTES} bytes")
        batch, self._held = self._held[:count], self._held[count:]
        return batch

    def _invoke(self, messages: list[MessageTypeDef]) -> None:
        self.batches += 1
        outcome = self._invoker.invoke(_event(messages))
        if not outcome.ok:
            # Like Lambda: the whole batch comes back after its visibility timeout.
            if outcome.error is not None:
                self.handler_errors += 1
            return
        response = outcome.result or {}
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), _SQS_MAX_PER_CALL):
            self._sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + _SQS_MAX_PER_CALL])
                ],
            )

    def drain(self, max_batches: int = 10_000) -> int:
        """Invoke batches until none is due; returns the messages handled.

        A partial batch still inside its window stays held: a later call, once the clock has
        passed the window, invokes it.
        """
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
