"""Processor Lambda: SQS batch of job ids -> each job's one outcome, with partial batch failures
(wiring only: the batch is ``batch_run``'s, each job ``processing``'s)."""

from __future__ import annotations

import functools
import gc
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from scrape_pipeline.clock import active_clock
from scrape_pipeline.processor.batch_run import BatchRun
from scrape_pipeline.processor.deadline import Deadline
from scrape_pipeline.wiring.processor import BuiltProcessor, build_processor

logger = Logger()
metrics = Metrics()


@functools.cache
def get_processor() -> BuiltProcessor:
    """The processor, its queue and its ledger, built once per container."""
    built = build_processor(os.environ, clock=active_clock())
    gc.freeze()
    return built


# Forget the cached one (tests change the environment between cases).
reset_processor = get_processor.cache_clear


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in, ``batchItemFailures`` out."""
    processor, queue, ledger = get_processor()
    # Built at the invocation's start, while the time left is its whole length.
    deadline = Deadline.of_invocation(
        lambda: context.get_remaining_time_in_millis() / 1000,
        processor.settings.stop_margin_seconds,
    )
    run = BatchRun(processor, queue, ledger, deadline, logger, metrics)
    # All failed is a normal state (every job throttled): not a Lambda error that alarms.
    batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(
        event=run.ordered(event), record_handler=run.handle, processor=batch, context=context
    )
    run.emit_events()
    return response
