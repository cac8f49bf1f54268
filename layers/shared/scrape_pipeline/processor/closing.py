"""Closing a job: its one outcome written DONE with its event (the outbox), a superseded record
retired, the batch a retried item belongs to woken."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.clock import Clock
from scrape_pipeline.events.detail import outcome_event
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.geonode.fields import of_type
from scrape_pipeline.geonode.models import Job
from scrape_pipeline.jobs import JobKey, Outcome
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.deadline import Attempt
from scrape_pipeline.processor.disposition import Disposition, MessageOutcome, items_dead
from scrape_pipeline.processor.resubmission import RetryRef
from scrape_pipeline.processor.results import ResultStore

# Wakes a batch or crawl (sends its message): an extract job retrying one of its items settled.
type Waker = Callable[[JobKey], None]


def _settled_at(job: Job | None) -> float | None:
    """When the API says the job completed, if it does."""
    return job.completed_at.timestamp() if job is not None and job.completed_at else None


class Closer:
    """Writes a job's outcome as the lease holder of ``attempt``."""

    def __init__(
        self,
        ledger: WorkLedger,
        results: ResultStore,
        *,
        clock: Clock,
        emitter: Emitter | None = None,
        waker: Waker,
    ) -> None:
        self._ledger = ledger
        self._results = results
        self._clock = clock
        # None: no bus (EVENT_BUS_NAME unset), so no outcome is told and nothing is kept for it.
        self._emitter = emitter
        self._waker = waker

    def dead_letter(self, attempt: Attempt, record: Mapping[str, Any]) -> Disposition:
        key = attempt.key
        self._retire_superseded(attempt.row)
        where = self._results.dead_letter(key.kind, key.job_id, {"job_id": key.job_id, **record})
        reason = str(record.get("reason", ""))
        detail = {"record": where, "reason": reason}
        url = of_type(record.get("url"), str)
        return self.finish(attempt, Outcome.DEAD_LETTERED, detail, url=url, said=reason)

    def finish(
        self,
        attempt: Attempt,
        outcome: Outcome,
        detail: dict[str, str],
        *,
        url: str | None = None,
        keys: list[str] | None = None,
        job: Job | None = None,
        said: str = "",
    ) -> Disposition:
        """DONE with ``outcome``, its event (naming the row's run then) in the same write (the
        outbox), held for the emit; the message's Disposition (``said``: its detail)."""
        if outcome is not Outcome.DEAD_LETTERED:  # ``dead_letter`` did, before its own write
            self._retire_superseded(attempt.row)
        now = self._clock.time()
        told = partial(
            outcome_event,
            attempt.key,
            outcome,
            reopens=attempt.row.reopens,
            finished_at=now,
            settled_at=_settled_at(job),
            bucket=self._results.bucket,
            detail=detail,
            url=url,
            keys=keys,
        )
        event = told(run=attempt.row.run)
        if self._emitter is None or event is None:
            self._ledger.finish(attempt.key, attempt.owner, outcome, detail)
        else:

            def tell(run: str | None) -> str:
                return (told(run=run) or event).to_json()

            row = self._ledger.finish(
                attempt.key, attempt.owner, outcome, detail, event=tell, run=attempt.row.run
            )
            self._emitter.add(attempt.key, row.outbox_event or tell(row.run), now)
        if outcome is not Outcome.RESUBMITTED:  # the item goes on with the new job (``hand_on``)
            self._wake_parent(attempt.row)
        return Disposition(
            MessageOutcome(outcome), detail=said, items_dead_lettered=items_dead(detail)
        )

    def _retire_superseded(self, row: LedgerRow) -> None:
        """A reopened job's dead-letter record, retired before its outcome is written, so a new
        dead letter is the one live record."""
        superseded = row.detail.get("superseded")
        if superseded:
            self._results.retire(superseded)

    def _wake_parent(self, row: LedgerRow) -> None:
        """A retried item's extract job settled: its batch or crawl settles it now (if the
        message is not sent, the watch sweep wakes the batch)."""
        ref = RetryRef.read(row.retry_of)
        if ref is None:
            return
        with contextlib.suppress(AWSUnavailableError):
            self._waker(ref.parent)


def failure_record(reason: str, api_job: Job | None) -> dict[str, Any]:
    """The dead-letter record of a failed job: why, and the API's error and URL if it said."""
    record: dict[str, Any] = {"reason": reason, "code": None, "message": None, "url": None}
    if api_job is not None:
        record["url"] = api_job.url
        if api_job.error is not None:
            record.update(code=api_job.error.code, message=api_job.error.message)
    return record
