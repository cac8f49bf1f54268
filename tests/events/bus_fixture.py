"""A bus in moto with a rule whose SQS target the tests read: events as a subscriber sees them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.events.detail import SOURCE


@dataclass(frozen=True)
class Subscriber:
    """A rule on the bus for every scrape-pipeline event, delivering to one queue."""

    sqs: Any
    queue_url: str

    def received(self) -> list[dict[str, Any]]:
        """Every event delivered so far (EventBridge's envelope, detail inside), drained."""
        out: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = batch.get("Messages", [])
            if not messages:
                return out
            for message in messages:
                out.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )


def subscribe(events: Any, sqs: Any, bus: str, name: str = "test-subscriber") -> Subscriber:
    """A queue and a rule on ``bus`` that sends it every event of ours."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps({"source": [SOURCE]}))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}])
    return Subscriber(sqs, url)
