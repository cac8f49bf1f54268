"""The writes that link a job's row to a run or to the item it retries, and the rows of
jobs just submitted: the submitter's and the processor's, never the receiver's."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from scrape_pipeline.jobs import SOURCE_SUBMITTED, JobKey, JobState
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import Field, Update, expressions, state_is
from scrape_pipeline.ledger.intake import Intake
from scrape_pipeline.ledger.rows import Item, LedgerRow, from_item, to_item
from scrape_pipeline.ledger.table import ConditionFailedError, LedgerError, call, in_state


class Links(Intake):
    """Rows linked to runs and retried items; rows of submitted jobs; the moves as booleans."""

    def mark_enqueued(self, row: LedgerRow) -> bool:
        """``enqueue``, saying only whether it moved."""
        return self.enqueue(row) is not None

    def reopen(self, row: LedgerRow, *, evidence: str | None = None) -> bool:
        """``reopened``, saying only whether it moved."""
        return self.reopened(row, evidence=evidence) is not None

    def submitted_row(self, key: JobKey, now: float, *, run: str | None = None) -> Item:
        """The new row of a job just submitted (WATCHING, nothing enqueued): ``run``'s."""
        item = self.new_row(
            key, now=now, source=SOURCE_SUBMITTED, state=JobState.WATCHING, job_created_at=now
        )
        return item if run is None else {**item, **to_item({Attr.RUN: run})}

    def submitted_put(self, key: JobKey, now: float, *, run: str | None = None) -> dict[str, Any]:
        """``submitted_row`` as a ``TransactWriteItems`` Put under ``record``'s condition."""
        item = self.submitted_row(key, now, run=run)
        condition = expressions(ConditionExpression=state_is(lifecycle.RECORD))
        return {"TableName": self.table_name, "Item": item, **condition}

    def link_run(self, key: JobKey, run: str) -> bool:
        """Name ``run`` on the job's row if there is one; False if there is none."""
        try:
            call(self.client, "UpdateItem", **self.link_run_update(key, run))
        except ConditionFailedError:
            return False
        return True

    def link_run_update(self, key: JobKey, run: str) -> dict[str, Any]:
        """``link_run`` as a ``TransactWriteItems`` Update: only ``run`` is written, so a
        settled row keeps its state and stays out of the pending index."""
        request = expressions(
            UpdateExpression=Update().set(Attr.RUN, run),
            ConditionExpression=state_is(lifecycle.LINK_RUN),
        )
        return {"TableName": self.table_name, "Key": {Attr.PK.value: {"S": key.pk}}, **request}

    def link_retry(self, key: JobKey, item: str, *, run: str | None = None) -> bool:
        """Link an extract job that retries a batch's or crawl's ``item`` to it (and to
        ``run``): recorded WATCHING if it has no row yet; the first link stands."""
        now = self.clock.time()
        created = self._watched(key, now).set(Attr.RETRY_OF, item)
        linked = Update().set(Attr.RETRY_OF, item)
        if run is not None:
            created, linked = created.set(Attr.RUN, run), linked.set(Attr.RUN, run)
        if self._moved(key, lifecycle.LINK_NEW_RETRY, created, Field(Attr.PK).not_exists(), now):
            return True
        unlinked = Field(Attr.RETRY_OF).not_exists()
        return self._moved(key, lifecycle.LINK_RETRY, linked, unlinked, now)

    def carry_run(self, key: JobKey, run: str) -> LedgerRow:
        """Name ``run`` on the row of a job that resubmits one of the run's (recorded WATCHING
        if it has none yet) unless it names another run: the row as it is then."""
        now = self.clock.time()
        created = self._watched(key, now).set(Attr.RUN, run)
        unnamed = Field(Attr.RUN).not_exists() | Field(Attr.RUN).eq(run)
        for _ in range(2):  # a row undone between the two (``forget_unsent``): created again
            with contextlib.suppress(ConditionFailedError):
                condition = state_is(lifecycle.CARRY_NEW_RUN)
                return from_item(
                    self._update(key, condition, created, now, returns_new=True)["Attributes"]
                )
            try:
                condition = state_is(lifecycle.CARRY_RUN) & unnamed
                named = Update().set(Attr.RUN, run)
                return from_item(
                    self._update(key, condition, named, now, returns_new=True)["Attributes"]
                )
            except ConditionFailedError as refused:
                if refused.old is not None:
                    return from_item(refused.old)
        raise LedgerError(f"{key.pk} neither absent nor present while its run was carried")

    @staticmethod
    def _watched(key: JobKey, now: float) -> Update:
        """The new row of a job posted a moment ago, waiting WATCHING for its webhook."""
        return (
            in_state(JobState.WATCHING, now)
            .set(Attr.KIND, key.kind)
            .set(Attr.JOB_ID, key.job_id)
            .set(Attr.CREATED_AT, now)
            .set(Attr.SOURCE, SOURCE_SUBMITTED)
            .set(Attr.TOKEN, uuid.uuid4().hex)
            .set(Attr.ATTEMPTS, 0)
            .set(Attr.JOB_CREATED_AT, now)
        )
