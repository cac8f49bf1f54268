"""Processor Lambda: SQS batch of job ids -> each job's one outcome, with partial batch failures.

Wiring only: the logic is ``scrape_pipeline.processing``. A message to be retried later gets
its visibility changed and is reported failed; a Lambda never sleeps.
"""

from __future__ import annotations

import contextlib
import gc
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

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.ledger import LedgerError
from scrape_pipeline.processing import OUTCOME_METRICS, Deadline, JobProcessor
from scrape_pipeline.queue import JobMessage, JobQueue
from scrape_pipeline.wiring import build_processor

logger = Logger()
metrics = Metrics()
# All failed is a normal state (every job throttled): not a Lambda error that alarms.
batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
_built: tuple[JobProcessor, JobQueue] | None = None
# Batches processed in arrival order because the ledger could not say which jobs are suspects.
UNORDERED_METRIC = "ProcessorBatchUnordered"
# The running invocation's deadline, set once at its start (record handlers share it).
_deadline: Deadline | None = None
# This invocation's records with earlier failed or killed attempts (message ids), and the
# receipt handles of the records it has finished so far (see record_handler).
_suspects: set[str] = set()
_finished: list[str] = []


class RetryLaterError(Exception):
    """Reported as a batch item failure: SQS brings the message back after its visibility."""


def get_processor() -> tuple[JobProcessor, JobQueue]:
    """The processor and its queue, built once per container."""
    global _built  # noqa: PLW0603 - one per warm container, on purpose
    if _built is None:
        _built = build_processor()
        gc.freeze()
    return _built


def reset_processor() -> None:
    """Forget the cached processor (tests change the environment)."""
    global _built  # noqa: PLW0603
    _built = None


def record_handler(record: SQSRecord) -> None:
    """One message: one job, before the invocation's deadline."""
    processor, queue = get_processor()
    if record.message_id in _suspects and _finished:
        # A suspect may kill the invocation, and a killed invocation reports nothing: the
        # batch-mates finished before it would come back, and round the redrive limit into
        # the DLQ. Delete them now (one call, only in batches with a suspect).
        with contextlib.suppress(AWSUnavailableError):
            queue.acknowledge(_finished)
        _finished.clear()
    message = JobMessage.from_json(record.body)
    disposition = processor.process(message, deadline=_deadline)
    metrics.add_metric(name=OUTCOME_METRICS[disposition.outcome], unit=MetricUnit.Count, value=1)
    logger.info(
        "job",
        extra={
            "kind": message.key.kind.value,
            "job_id": message.key.job_id,
            "source": message.source,
            "outcome": disposition.outcome,
            "retry_in": disposition.retry_in,
            "detail": disposition.detail,
        },
    )
    if disposition.retry_in is None:
        _finished.append(record.receipt_handle)
        return
    resent = queue.retry_later(
        message,
        receipt_handle=record.receipt_handle,
        seconds=disposition.retry_in,
        receive_count=int(record.attributes.approximate_receive_count or 1),
        max_receive_count=processor.settings.max_receive_count,
    )
    if not resent:
        raise RetryLaterError(disposition.outcome)
    _finished.append(record.receipt_handle)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in, ``batchItemFailures`` out."""
    global _deadline  # noqa: PLW0603 - one invocation at a time per container
    processor, _ = get_processor()
    _deadline = Deadline.of_invocation(
        lambda: context.get_remaining_time_in_millis() / 1000,
        processor.settings.stop_margin_seconds,
    )
    _finished.clear()
    ordered = {**event, "Records": _suspects_last(processor, event.get("Records") or [])}
    return process_partial_response(
        event=ordered, record_handler=record_handler, processor=batch, context=context
    )


def _suspects_last(processor: JobProcessor, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch's records, jobs with earlier failed or killed attempts last (``_suspects``)."""
    _suspects.clear()
    if len(records) < 2:
        return records  # no batch-mates to protect: no ledger read
    messages: list[JobMessage | None] = []
    for record in records:
        try:
            messages.append(JobMessage.from_json(record.get("body")))
        except ValueError:
            messages.append(None)  # not a job: record_handler reports it failed, in place
    try:
        order, suspects = processor.suspects_last(messages)
    except (AWSUnavailableError, LedgerError) as exc:
        # The order only protects batch-mates from a job that kills its invocation: without
        # it the batch is still processed, record by record, each failing for itself alone.
        logger.warning("batch left unordered", extra={"error": type(exc).__name__})
        metrics.add_metric(name=UNORDERED_METRIC, unit=MetricUnit.Count, value=1)
        return records
    _suspects.update(str(records[i].get("messageId")) for i in suspects)
    return [records[i] for i in order]
