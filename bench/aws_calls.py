"""AWS calls counted through botocore's public event hooks, one counter per boto3 session."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import boto3

from scrape_pipeline_local.settings import local_settings
from scrape_pipeline_local.sqs_poller import SqsEventSource
from scrape_pipeline_local.translate import translate

# Each function's handler module and the function that builds (and caches) its clients.
BUILDERS = {
    "receiver": "get_receiver",
    "processor": "get_processor",
    "reconciler": "get_reconciler",
}
EVENT_SOURCE = "event_source"
EMPTY_RECEIVE = "sqs:ReceiveMessage(empty)"


class AwsCalls:
    """Counts the calls of every client a boto3 session makes, by ``service:Operation``."""

    def __init__(self, session: Any, *, empty_receives: bool = False) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        session.events.register("before-call.*.*", self._count)
        if empty_receives:
            session.events.register("after-call.sqs.ReceiveMessage", self._empty)

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.counts[f"{model.service_model.service_name}:{model.name}"] += 1

    def _empty(self, parsed: dict[str, Any], **_: Any) -> None:
        if not parsed.get("Messages"):
            with self._lock:
                self.counts["sqs:ReceiveMessage"] -= 1
                self.counts[EMPTY_RECEIVE] += 1

    def figures(self) -> dict[str, int]:
        """Call -> count, sorted, without calls never made."""
        return {call: n for call, n in sorted(self.counts.items()) if n}


def take(sqs: Any, queue_url: str, **receive: Any) -> list[dict[str, Any]]:
    """One receive of up to ten messages, deleted in one batch; the messages."""
    answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, **receive)
    messages: list[dict[str, Any]] = answer.get("Messages", [])
    if messages:
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
        ]
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    return messages


def event_source_on(stack: Any, sqs: Any, handler: Any = None) -> SqsEventSource:
    """A copy of the stack's SQS event source that polls through ``sqs`` (a counted client)."""
    poller = stack.poller
    timeout = stack.settings.processor_timeout
    if timeout is None:
        timeout = local_settings(translate(), stack.resources)["processor_timeout"]
    return SqsEventSource(
        sqs,
        stack.resources.queue_url,
        handler or stack.handlers["processor"].lambda_handler,
        batch_size=poller.batch_size,
        batching_window_seconds=poller.batching_window_seconds,
        timeout_seconds=timeout,
        clock=stack.clock,
    )


def count_by_function(
    stack: Any, watch: Callable[[str, Any], None] | None = None
) -> dict[str, AwsCalls]:
    """Count a started stack's calls by the function that makes them, its event source apart."""
    counted: dict[str, AwsCalls] = {}
    previous = boto3.DEFAULT_SESSION
    try:
        for name, builder in BUILDERS.items():
            session = boto3.session.Session()
            counted[name] = AwsCalls(session, empty_receives=True)
            if watch is not None:
                watch(name, session)
            boto3.DEFAULT_SESSION = session  # the clients the builder makes are this session's
            getattr(stack.handlers[name], builder)()
    finally:
        boto3.DEFAULT_SESSION = previous
    session = boto3.session.Session()
    counted[EVENT_SOURCE] = AwsCalls(session, empty_receives=True)
    stack.poller = event_source_on(stack, session.client("sqs"))
    return counted
