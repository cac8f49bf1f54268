"""A batch's or crawl's items stored page by page, with a checkpoint in the ledger after each,
so a large job completes across invocations without storing a page twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.models import ApiStatus, BatchItem, BatchStatus
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.deadline import Attempt, OutOfTimeError
from scrape_pipeline.processor.manifest import (
    Counts,
    Covered,
    ItemRecord,
    ItemStatus,
    ManifestWriter,
    counted,
    retrying_by_index,
)
from scrape_pipeline.processor.resubmission import (
    Resubmitter,
    RetryRef,
    is_retryable,
)
from scrape_pipeline.processor.results import ResultStore, metadata_of, result_prefix

BATCH_PAGE_SIZE = 50  # the API's largest page of batch and crawl items
# In ``store_items``' detail: items still retrying (no manifest yet), and the job's page count.
DETAIL_RETRYING = "items_retrying"
DETAIL_PAGES = "pages"
DETAIL_CANCELLED = "items_cancelled"


@dataclass
class _Pass:
    """One attempt's pass over the pages: the retrying items (index to job id), the page's
    status; ``retry``: retryably failed items are resubmitted."""

    attempt: Attempt
    retry: bool
    noted: dict[int, str]
    status: BatchStatus


@dataclass(frozen=True)
class _Position:
    """Where storing stands (the checkpoint's fields): the page, the item in it, the counts."""

    page: int
    item: int
    counts: Counts

    def plus(self, covered: Covered) -> _Position:
        """On to the end of what the parts cover, their items counted."""
        return _Position(self.page, covered.end, counted(covered.records, self.counts))


@dataclass
class _PageDone:
    """What storing (part of) one page did."""

    pending: bool = False  # an item still runs (a cancelled job's in-flight one)
    stopped_at: int | None = None  # out of time: the position of the first item not done
    records: list[ItemRecord] = field(default_factory=list)  # the settled items, for the part


class PagedStore:
    """Stores a batch's or crawl's items once each, dead-letters its failed ones."""

    def __init__(
        self,
        *,
        ledger: WorkLedger,
        client: GeonodeClient,
        results: ResultStore,
        retrier: Resubmitter,
        retryable_codes: Sequence[str] = (),
    ) -> None:
        self._ledger = ledger
        self._client = client
        self._results = results
        self.manifest = ManifestWriter(results)
        self._retrier = retrier
        self._retryable_codes = tuple(retryable_codes)

    def page(self, attempt: Attempt, page: int) -> BatchStatus:
        """The batch's or crawl's state with page ``page``: out of time unless it fits, timed
        from now if it does."""
        if not attempt.deadline.room_for_page(attempt.row.page_seconds):
            raise OutOfTimeError
        attempt.deadline.start_page()
        key = attempt.key
        get = self._client.get_batch if key.kind is JobKind.BATCH else self._client.get_crawl
        return get(key.job_id, page=page, page_size=BATCH_PAGE_SIZE)

    def store_items(
        self, attempt: Attempt, first_page: BatchStatus, *, retry: bool = False
    ) -> dict[str, str] | None:
        """Store each completed item once, dead-letter (``retry``: resubmit the retryable) the
        failed, from the checkpoint on; None while an item is pending."""
        row = attempt.row
        counts = (row.items_stored, row.items_failed, row.items_cancelled)
        noted = retrying_by_index(row.retrying_items)
        run = _Pass(attempt, retry, noted, first_page)
        end = self._store_pages(run, _Position(row.next_page, row.next_item, counts))
        if end is None:
            return None
        attempt.deadline.end_page()
        if not noted:
            return self.closed(attempt.key, end.counts, run.status)
        self.manifest.keep_status(attempt.key, run.status)
        retrying = {DETAIL_RETRYING: str(len(noted)), DETAIL_PAGES: str(end.page)}
        return {**items_detail(attempt.key, end.counts), **retrying}

    def closed(self, key: JobKey, counts: Sequence[int], status: BatchStatus) -> dict[str, str]:
        """The detail of a job none of whose items is left: its manifest written (last, and
        before the caller's DONE: a manifest means every item is accounted for)."""
        detail = {**items_detail(key, counts), "manifest": self.manifest.write(key, status)}
        # The job's whole charge, final now that nothing is pending: runs show adds it up.
        if status.tokens_charged is not None:
            detail[DETAIL_TOKENS] = str(status.tokens_charged)
        return detail

    def _store_pages(self, run: _Pass, at: _Position) -> _Position | None:
        """The pages from ``at`` to the last (``run.status`` the last page's): where they ended."""
        attempt = run.attempt
        while True:
            done = self._store_page(run, at)
            page = run.status.page
            last = at.page >= page.page_count or not page.items
            # An item of this page (before a deadline's stop), or of the job's last, is pending.
            if done.pending or (done.stopped_at is None and last and run.status.pending > 0):
                self._hold_page(attempt, at, done)
                return None
            size = len(page.items)
            at = at.plus(
                self.manifest.record_range(
                    attempt.key, at.page, at.item, done.records, page_items=size, last=last
                )
            )
            if at.item < size:
                # Out of time inside a page too long for what was left: the items done are
                # progress, and the next attempt goes on from the next one.
                self._checkpoint(attempt, at)
                raise OutOfTimeError
            if last:
                return at
            at = self._turn_page(run, at, done)

    def _turn_page(self, run: _Pass, at: _Position, done: _PageDone) -> _Position:
        """Checkpoint the next page as where to go on, and read it if there is time."""
        at = replace(at, page=at.page + 1, item=0)
        self._checkpoint(run.attempt, at)
        if done.stopped_at is not None:
            raise OutOfTimeError  # out of time, though a dead attempt's part ended the page
        run.status = self.page(run.attempt, at.page)
        return at

    def _hold_page(self, attempt: Attempt, at: _Position, done: _PageDone) -> None:
        """A page with an item pending, or cut by the deadline (``OutOfTimeError``): its counts
        and part wait for the pass that finds it drained, so none is counted twice."""
        if any(r.status in (ItemStatus.STORED, ItemStatus.DEAD_LETTERED) for r in done.records):
            self._checkpoint(attempt, at)
        if done.stopped_at is not None:
            raise OutOfTimeError

    def _store_page(self, run: _Pass, at: _Position) -> _PageDone:
        """One page's items from ``at.item``; the deadline stops it after one item at least."""
        done = _PageDone()
        for position, item in enumerate(run.status.page.items[at.item :], start=at.item):
            if position > at.item and run.attempt.deadline.near():
                done.stopped_at = position
                return done
            record = self._record(run, item, _index(item, at.page, position))
            if record is None:
                done.pending = True
            else:
                done.records.append(record)
        return done

    def _record(self, run: _Pass, item: BatchItem, index: int) -> ItemRecord | None:
        """Store, dead-letter or retry one settled item: its record (None: it is pending)."""
        key = run.attempt.key
        if item.status == ApiStatus.COMPLETED:
            metadata = metadata_of(item.raw)
            stored = self._results.store(key.kind, key.job_id, item.data, metadata, item=index)
            return ItemRecord.of(item, index, ItemStatus.STORED, stored)
        if item.status == ApiStatus.CANCELLED:
            return ItemRecord.of(item, index, ItemStatus.CANCELLED)
        if item.status != ApiStatus.FAILED:
            return None
        if run.retry and is_retryable(item, self._retryable_codes):
            # Resubmitted as a linked extract job, unless the budget allows none.
            job_id = self._retrier.retry_item(
                RetryRef(key, index), item, status=run.status, attempt=run.attempt, noted=run.noted
            )
            if job_id is not None:
                run.noted[index] = job_id
                return ItemRecord.of(item, index, ItemStatus.RETRYING, retry_job=job_id)
        record = {"url": item.url, "code": item.error_code, "message": item.error_message}
        where = self._results.dead_letter(key.kind, key.job_id, record, item=index)
        return ItemRecord.of(item, index, ItemStatus.DEAD_LETTERED, [where])

    def _checkpoint(self, attempt: Attempt, at: _Position) -> None:
        """Record the pages (and items) done so far: progress, which clears the strikes."""
        attempt.deadline.end_page()
        page_seconds = attempt.deadline.longest_page or attempt.row.page_seconds
        self._ledger.checkpoint(
            attempt.key,
            attempt.owner,
            next_page=at.page,
            stored=at.counts[0],
            failed=at.counts[1],
            page_seconds=page_seconds,
            next_item=at.item,
            cancelled=at.counts[2],
        )


def items_detail(key: JobKey, counts: Sequence[int]) -> dict[str, str]:
    """A batch's or crawl's detail: where its items are, how many were stored, failed, cancelled."""
    names = ("items_stored", "items_failed", DETAIL_CANCELLED)
    return {
        "prefix": result_prefix(key.kind, key.job_id),
        **{name: str(count) for name, count in zip(names, counts, strict=True)},
    }


def _index(item: BatchItem, page: int, position: int) -> int:
    """The item's index in the job: as the API numbers it, else by its place."""
    if item.input_index is not None:
        return item.input_index
    return (page - 1) * BATCH_PAGE_SIZE + position
