"""Follow the stack's bus: a temporary rule and queue, each event printed, both removed after.

    open()    a queue, a policy letting only the new rule send to it, the rule on the bus
              (every ``scrape-pipeline`` event) with the queue as its target
    events()  long-polls the queue; each event once (deleted when yielded)
    close()   the target, the rule and the queue removed, whatever ended the tail (Ctrl-C too)

Like ``sam logs --tail``: events put on the bus before the rule exists are not seen.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any, Self

from scrape_pipeline.events.detail import SOURCE

TAIL_PREFIX = "scrape-pipeline-tail-"
_TARGET_ID = "tail-queue"


class BusTail:
    """One tail of ``bus``: its own rule and queue, named ``scrape-pipeline-tail-<random>``."""

    def __init__(self, bus: str, *, events: Any, sqs: Any, wait_seconds: int = 20) -> None:
        self.bus = bus
        self.name = f"{TAIL_PREFIX}{secrets.token_hex(4)}"
        self._events = events
        self._sqs = sqs
        self._wait = wait_seconds
        self.queue_url: str | None = None
        self.rule_arn: str | None = None

    def __enter__(self) -> Self:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """The queue, its policy, the rule and its target."""
        self.queue_url = self._sqs.create_queue(QueueName=self.name)["QueueUrl"]
        attrs = self._sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        queue_arn = attrs["Attributes"]["QueueArn"]
        self.rule_arn = self._events.put_rule(
            Name=self.name,
            EventBusName=self.bus,
            EventPattern=json.dumps({"source": [SOURCE]}),
            Description="scrape-pipeline events tail (removed when the tail ends)",
        )["RuleArn"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "events.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": self.rule_arn}},
                }
            ],
        }
        self._sqs.set_queue_attributes(
            QueueUrl=self.queue_url, Attributes={"Policy": json.dumps(policy)}
        )
        self._events.put_targets(
            Rule=self.name, EventBusName=self.bus, Targets=[{"Id": _TARGET_ID, "Arn": queue_arn}]
        )

    def events(self) -> Iterator[dict[str, Any]]:
        """Each event as EventBridge delivered it (envelope, ``detail`` inside), for ever."""
        assert self.queue_url is not None, "open() first"
        while True:
            response = self._sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=self._wait
            )
            for message in response.get("Messages", []):
                self._sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
                yield json.loads(message["Body"])

    def close(self) -> None:
        """Remove what ``open`` made, each part even if another's removal fails."""
        if self.rule_arn is not None:
            try:
                self._events.remove_targets(Rule=self.name, EventBusName=self.bus, Ids=[_TARGET_ID])
            finally:
                self._events.delete_rule(Name=self.name, EventBusName=self.bus)
                self.rule_arn = None
        if self.queue_url is not None:
            self._sqs.delete_queue(QueueUrl=self.queue_url)
            self.queue_url = None
