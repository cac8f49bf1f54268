"""Submitter Lambda (SQS: the submissions queue): a run file's URLs posted, across invocations.

Wiring only: a message's round is ``scrape_pipeline.runs.inside``'s, each POST the engine's
(``scrape_pipeline.runs.engine``). A message whose round raised is reported failed and comes
back after the queue's visibility timeout; the journal says where the run stands.
"""

from __future__ import annotations

import functools
import gc
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from scrape_pipeline.clock import active_clock
from scrape_pipeline.runs.inside import Inside, Next
from scrape_pipeline.wiring.submitter import build_inside

logger = Logger()
metrics = Metrics()


@functools.cache
def get_inside() -> Inside:
    """The submitter's logic, built once per container."""
    inside = build_inside(os.environ, clock=active_clock())
    gc.freeze()
    return inside


# Forget the cached one (tests change the environment between cases).
reset_inside = get_inside.cache_clear


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in (one message: the event source's BatchSize), ``batchItemFailures`` out."""
    inside = get_inside()

    def handle(record: SQSRecord) -> None:
        for done in inside.handle(
            record.body, lambda: context.get_remaining_time_in_millis() / 1000
        ):
            report = done.report
            extra = {
                "run": done.run,
                "next": done.next,
                "reason": done.reason,
                "delay_s": done.delay_s,
            }
            if report is not None:
                extra.update(
                    posts=report.posts, counts={str(k): v for k, v in report.counts.items()}
                )
                metrics.add_metric(
                    name="SubmissionPosts", unit=MetricUnit.Count, value=report.posts
                )
            log = logger.error if done.next in (Next.STOPPED, Next.DROPPED) else logger.info
            log("submission run", extra=extra)

    batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return process_partial_response(
        event=event, record_handler=handle, processor=batch, context=context
    )
