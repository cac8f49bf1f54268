"""One processor invocation's batch: suspects last, their finished batch-mates deleted first, so a
job that kills its invocation cannot send them round the redrive limit into the DLQ."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import LedgerError
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.deadline import Deadline
from scrape_pipeline.processor.processing import JobProcessor
from scrape_pipeline.processor.queue import JobMessage, JobQueue, read_message

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

# Batches processed in arrival order because the ledger could not say which jobs are suspects.
UNORDERED_METRIC = "ProcessorBatchUnordered"
# PutEvents calls made at batches' ends, and the events they left in the outbox for the sweep.
EMIT_CALLS_METRIC = "EventsPutCalls"
EMIT_LEFT_METRIC = "EventsLeftInOutbox"


class RetryLaterError(PipelineError):
    """Reported as a batch item failure: SQS brings the message back after its visibility."""


def suspects_last(
    messages: Sequence[JobMessage | None], rows: Mapping[JobKey, LedgerRow]
) -> tuple[list[int], set[int]]:
    """The order to process a batch in, jobs with strikes last (fewest first), and the indexes
    of those suspects."""

    def strikes(index: int) -> int:
        message = messages[index]
        row = rows.get(message.key) if message is not None else None
        return row.strikes if row is not None and not row.is_done else 0

    order = sorted(range(len(messages)), key=strikes)  # stable: equal strikes keep order
    return order, {i for i in order if strikes(i) > 0}


@dataclass
class BatchRun:
    """One invocation: ``ordered`` the event once, then ``handle`` each record of it."""

    processor: JobProcessor
    queue: JobQueue
    ledger: WorkLedger
    deadline: Deadline
    logger: Logger
    metrics: Metrics
    # The message ids with earlier failed or killed attempts; receipt handles finished so far.
    suspects: set[str] = field(default_factory=set)
    finished: list[str] = field(default_factory=list)

    def ordered(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The SQS event with its records in processing order (suspects last)."""
        return {**event, "Records": self._suspects_last(event.get("Records") or [])}

    def handle(self, record: SQSRecord) -> None:
        """One message: one job, before the invocation's deadline."""
        if record.message_id in self.suspects and self.finished:
            # A suspect may kill the invocation: delete its finished batch-mates now.
            with contextlib.suppress(AWSUnavailableError):
                self.queue.acknowledge(self.finished)
            self.finished.clear()
        message = read_message(record.body)
        disposition = self.processor.process(message, deadline=self.deadline)
        self.metrics.add_metric(name=disposition.outcome.metric, unit=MetricUnit.Count, value=1)
        for name, count in disposition.item_metrics().items():
            self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
        self.logger.info(
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
        if disposition.retry_in is not None and not self.queue.retry_later(
            message,
            receipt_handle=record.receipt_handle,
            seconds=disposition.retry_in,
            receive_count=int(record.attributes.approximate_receive_count or 1),
            max_receive_count=self.processor.settings.max_receive_count,
        ):
            raise RetryLaterError(disposition.outcome)
        self.finished.append(record.receipt_handle)

    def emit_events(self) -> None:
        """At the batch's end: its outcomes' events (what the bus did not take stays in the
        outbox for the reconciler's sweep, so nothing here fails the batch)."""
        result = self.processor.emit_events()
        if result.calls:
            self.metrics.add_metric(
                name=EMIT_CALLS_METRIC, unit=MetricUnit.Count, value=result.calls
            )
        if result.left or result.errors:
            self.logger.warning(
                "events left in the outbox", extra={"left": result.left, "errors": result.errors}
            )
            self.metrics.add_metric(name=EMIT_LEFT_METRIC, unit=MetricUnit.Count, value=result.left)

    def _suspects_last(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(records) < 2:
            return records  # no batch-mates to protect: no ledger read
        messages = [_job_message(record.get("body")) for record in records]
        try:
            # No job at all: no keys, and no call.
            rows = self.ledger.get_many([m.key for m in messages if m is not None])
        except (AWSUnavailableError, LedgerError) as exc:
            # The order only protects batch-mates: without it each record fails for itself.
            self.logger.warning("batch left unordered", extra={"error": type(exc).__name__})
            self.metrics.add_metric(name=UNORDERED_METRIC, unit=MetricUnit.Count, value=1)
            return records
        order, suspects = suspects_last(messages, rows)
        self.suspects.update(str(records[i].get("messageId")) for i in suspects)
        return [records[i] for i in order]


def _job_message(body: object) -> JobMessage | None:
    try:
        return read_message(body)
    except ValueError:
        return None  # not a job: handle reports it failed, in place
