"""The whole ledger, for the functions that bring jobs in as well as work them (reconciler,
submitter): the processor's ``WorkLedger``, intake, and the sweeps' reads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from boto3.dynamodb.conditions import Key

from scrape_pipeline.jobs import JobKey, JobState, Source
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import PENDING_INDEX, Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Condition, Update, expressions, state_is
from scrape_pipeline.ledger.intake import Intake
from scrape_pipeline.ledger.rows import Item, LedgerRow, from_item, to_item
from scrape_pipeline.ledger.table import call
from scrape_pipeline.ledger.work import WorkLedger


def _since(before: float, after: float | None) -> Condition:
    since = Key(Attr.STATE_SINCE)
    return since.lt(before) if after is None else since.between(after, before)


class Ledger(Intake, WorkLedger):
    """The processor's ledger, intake, a submitted job's row, and the sweeps' reads."""

    def submitted_row(self, key: JobKey, now: float, *, run: str | None = None) -> Item:
        """The new row of a job just submitted (WATCHING, nothing enqueued): ``run``'s."""
        values = self.new_values(key, now, Source.SUBMITTED, JobState.WATCHING)
        return to_item({Attr.PK: key.pk, **values, Attr.JOB_CREATED_AT: now, Attr.RUN: run})

    def submitted_put(self, key: JobKey, now: float, *, run: str | None = None) -> dict[str, Any]:
        """``submitted_row`` as a ``TransactWriteItems`` Put under ``record``'s condition."""
        item = self.submitted_row(key, now, run=run)
        condition = expressions(ConditionExpression=state_is(lifecycle.RECORD))
        return {"TableName": self.table_name, "Item": item, **condition}

    def link_run_update(self, key: JobKey, run: str) -> dict[str, Any]:
        """A ``TransactWriteItems`` Update naming ``run`` on the job's row if there is one (only
        ``run`` is written: a settled row stays out of the pending index)."""
        request = expressions(
            UpdateExpression=Update().set(Attr.RUN, run),
            ConditionExpression=state_is(lifecycle.LINK_RUN),
        )
        return {"TableName": self.table_name, "Key": {Attr.PK.value: {"S": key.pk}}, **request}

    def pending(
        self,
        state: JobState,
        *,
        since_before: float,
        since_after: float | None = None,
        limit: int = 100,
        cursor: Mapping[str, Any] | None = None,
    ) -> tuple[list[LedgerRow], dict[str, Any] | None]:
        """A page of rows in ``state`` (not DONE) since before ``since_before`` (and from
        ``since_after``, a resume point that stays valid however rows moved), oldest first."""
        key = Key(Attr.PENDING_STATE).eq(state) & _since(since_before, since_after)
        request = {"TableName": self.table_name, "IndexName": PENDING_INDEX, "Limit": limit}
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        response = call(self.client, "Query", **request, **expressions(KeyConditionExpression=key))
        rows = [from_item(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")

    def scan_jobs(
        self, *attributes: Attr, only: Condition | None = None
    ) -> Iterator[dict[str, Any]]:
        """The job rows' items (bookkeeping rows skipped), projected to the key and
        ``attributes``, page by page."""
        request: dict[str, Any] = {"TableName": self.table_name}
        request |= expressions(FilterExpression=only, ProjectionExpression=(Attr.PK, *attributes))
        while True:
            page = call(self.client, "Scan", **request)
            for item in page.get("Items", []):
                if not item[Attr.PK]["S"].startswith(tuple(RowPrefix)):
                    yield dict(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
