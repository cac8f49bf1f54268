"""The whole ledger for the functions that run more than intake: its leases, the outbox, bulk
reads, and the rows of submitted jobs linked to runs and retried items."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from scrape_pipeline.jobs import SOURCE_SUBMITTED, JobKey, JobKind, JobState
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import PENDING_INDEX, Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Condition, Field, Update, expressions, state_is
from scrape_pipeline.ledger.intake import Intake
from scrape_pipeline.ledger.leases import Leases
from scrape_pipeline.ledger.outbox import OutboxRows
from scrape_pipeline.ledger.rows import Item, LedgerRow, encode, from_item, to_item
from scrape_pipeline.ledger.table import ConditionFailedError, LedgerError, call


def _since(before: float, after: float | None) -> Condition:
    since = Key(Attr.STATE_SINCE)
    return since.lt(before) if after is None else since.between(after, before)


class Ledger(Intake, Leases, OutboxRows):
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""

    def submitted_row(self, key: JobKey, now: float, *, run: str | None = None) -> Item:
        """The new row of a job just submitted (WATCHING, nothing enqueued): ``run``'s."""
        values = self.new_values(key, now, SOURCE_SUBMITTED, JobState.WATCHING)
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

    def _watched(self, key: JobKey, now: float) -> Update:
        """The new row of a job posted a moment ago, waiting WATCHING for its webhook."""
        update = Update().set(Attr.JOB_CREATED_AT, now)
        for attr, value in self.new_values(key, now, SOURCE_SUBMITTED, JobState.WATCHING).items():
            update.set(attr, value)
        return update

    def get_many(self, keys: Sequence[JobKey]) -> dict[JobKey, LedgerRow]:
        """The rows of up to 100 jobs in one read (missing jobs are absent from the result)."""
        if len(keys) > 100:
            raise ValueError("at most 100 keys per read")
        items = self.batch_items([k.pk for k in keys]) if keys else []
        return {row.key: row for row in map(from_item, items)}

    def batch_items(self, pks: Sequence[str]) -> list[dict[str, Any]]:
        """The raw items of up to 100 partition keys, in one BatchGetItem (and its retries)."""
        keys = [{Attr.PK.value: encode(pk)} for pk in dict.fromkeys(pks)]
        request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
        items: list[dict[str, Any]] = []
        for _ in range(8):  # unprocessed keys come back under load: ask for them again
            response = call(self.client, "BatchGetItem", RequestItems=request)
            items += response.get("Responses", {}).get(self.table_name, [])
            request = dict(response.get("UnprocessedKeys") or {})
            if not request:
                return items
        raise LedgerError("BatchGetItem kept returning unprocessed keys")

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
        if state is JobState.DONE:
            raise ValueError("DONE rows are not in the pending index")
        key = Key(Attr.PENDING_STATE).eq(state) & _since(since_before, since_after)
        request = {"TableName": self.table_name, "IndexName": PENDING_INDEX, "Limit": limit}
        if cursor:
            request["ExclusiveStartKey"] = dict(cursor)
        response = call(self.client, "Query", **request, **expressions(KeyConditionExpression=key))
        rows = [from_item(item) for item in response.get("Items", [])]
        return rows, response.get("LastEvaluatedKey")

    def created_since(
        self, kind: JobKind, since: float, until: float | None = None
    ) -> Iterator[str]:
        """The ids of ``kind``'s jobs first written from ``since`` (to ``until``): a filtered
        Scan, an operator's call billed as the whole table."""
        created, low = Field(Attr.CREATED_AT), Decimal(repr(since))  # exact, not to the ms
        bound = created.gte(low) if until is None else created.between(low, Decimal(repr(until)))
        for item in self.scan_jobs(only=Field(Attr.PK).begins_with(f"{kind.value}#") & bound):
            yield JobKey.from_pk(item[Attr.PK.value]["S"]).job_id

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
