"""The ledger of the function that works jobs (the processor): its leases, the outbox, bulk
reads, and the rows of jobs linked to runs and retried items (no intake: ``full`` adds it)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from scrape_pipeline.jobs import SOURCE_SUBMITTED, JobKey, JobState
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import Field, Update, state_is
from scrape_pipeline.ledger.leases import Leases
from scrape_pipeline.ledger.outbox import OutboxRows
from scrape_pipeline.ledger.rows import LedgerRow, encode, from_item
from scrape_pipeline.ledger.table import ConditionFailedError, LedgerError, call


class WorkLedger(Leases, OutboxRows):
    """Typed, conditional operations on the ledger table (one DynamoDB call each)."""

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
