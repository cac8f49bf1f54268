"""A batch's or crawl's items stored page by page, with a checkpoint in the ledger after each,
so a large job completes across invocations without storing a page twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from scrape_pipeline.geonode.batches import BatchItem, BatchStatus
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.models import ApiStatus
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.attempt import Attempt, OutOfTimeError
from scrape_pipeline.processor.item_retries import (
    ItemRetrier,
    RetryRef,
    is_retryable,
    retrying_by_index,
)
from scrape_pipeline.processor.manifest import Covered, ItemRecord, ItemStatus, ManifestWriter
from scrape_pipeline.processor.results import ResultStore, metadata_of, result_prefix

BATCH_PAGE_SIZE = 50  # the API's largest page of batch and crawl items
# In ``store_items``' detail: items still retrying (no manifest yet), and the job's page count.
DETAIL_RETRYING = "items_retrying"
DETAIL_PAGES = "pages"
DETAIL_CANCELLED = "items_cancelled"


@dataclass
class _Retries:
    """One attempt's retrying items (index to job id); no ``retrier``: none is retried."""

    retrier: ItemRetrier | None
    attempt: Attempt
    noted: dict[int, str]
    status: BatchStatus | None = None


@dataclass(frozen=True)
class _Position:
    """Where storing stands (the checkpoint's fields): the page, the item in it, the counts."""

    page: int
    item: int
    stored: int
    failed: int
    cancelled: int = 0

    def plus(self, covered: Covered) -> _Position:
        """On to the end of what the parts cover, their items counted."""
        statuses = [record.status for record in covered.records]
        return replace(
            self,
            item=covered.end,
            stored=self.stored + statuses.count(ItemStatus.STORED),
            failed=self.failed + statuses.count(ItemStatus.DEAD_LETTERED),
            cancelled=self.cancelled + statuses.count(ItemStatus.CANCELLED),
        )


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
        ledger: Ledger,
        client: GeonodeClient,
        results: ResultStore,
        retrier: ItemRetrier | None = None,
        retryable_codes: Sequence[str] = (),
    ) -> None:
        self._ledger = ledger
        self._client = client
        self._results = results
        self.manifest = ManifestWriter(results)
        self._retrier = retrier
        self._retryable_codes = tuple(retryable_codes)

    def first_page(self, attempt: Attempt) -> BatchStatus:
        """The batch's or crawl's state with the page its checkpoint points at, if it fits."""
        _begin_page(attempt)
        return self._get(attempt.key, page=attempt.row.next_page)

    def store_items(
        self, attempt: Attempt, first_page: BatchStatus, *, retry: bool = False
    ) -> dict[str, str] | None:
        """Store each completed item once and dead-letter the failed ones (``retry``: resubmit
        the retryable), from the checkpoint on; None while an item is pending."""
        row = attempt.row
        at = _Position(
            row.next_page, row.next_item, row.items_stored, row.items_failed, row.items_cancelled
        )
        retries = _Retries(
            self._retrier if retry else None, attempt, retrying_by_index(row.retrying_items)
        )
        stored = self._store_pages(attempt, at, first_page, retries)
        if stored is None:
            return None
        at, status = stored
        if attempt.deadline is not None:
            attempt.deadline.end_page()
        return self._finished(attempt, at, status, retries)

    def _store_pages(
        self, attempt: Attempt, at: _Position, status: BatchStatus, retries: _Retries
    ) -> tuple[_Position, BatchStatus] | None:
        """The pages from ``at`` to the last: where they ended and the last page's status."""
        while True:
            retries.status = status
            done = self._store_page(attempt.key, at, status, retries)
            last = at.page >= status.page.page_count or not status.page.items
            # An item of this page, or on its last of the job, is pending (stopped by the
            # deadline, a pending item past the stop is the next attempt's).
            if done.pending or (done.stopped_at is None and last and status.pending > 0):
                self._hold_page(attempt, at, done)
                return None
            size = len(status.page.items)
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
                return at, status
            at = replace(at, page=at.page + 1, item=0)
            self._checkpoint(attempt, at)
            if done.stopped_at is not None:
                raise OutOfTimeError  # out of time, though a dead attempt's part ended the page
            _begin_page(attempt)
            status = self._get(attempt.key, page=at.page)

    def _hold_page(self, attempt: Attempt, at: _Position, done: _PageDone) -> None:
        """A page with an item pending, or cut by the deadline (``OutOfTimeError``)."""
        # The page's finished items are stored (each object once); its counts and its part
        # wait for the pass that finds it drained, so none is counted twice and moving on
        # never skips a pending item.
        if any(r.status in (ItemStatus.STORED, ItemStatus.DEAD_LETTERED) for r in done.records):
            self._checkpoint(attempt, at)
        if done.stopped_at is not None:
            raise OutOfTimeError

    def _finished(
        self, attempt: Attempt, at: _Position, status: BatchStatus, retries: _Retries
    ) -> dict[str, str]:
        """The detail of a job whose every page is stored: its manifest, unless items retry."""
        detail = {
            "prefix": result_prefix(attempt.key.kind, attempt.key.job_id),
            "items_stored": str(at.stored),
            "items_failed": str(at.failed),
            DETAIL_CANCELLED: str(at.cancelled),
        }
        if retries.noted:
            self.manifest.keep_status(attempt.key, status)
            detail[DETAIL_RETRYING] = str(len(retries.noted))
            detail[DETAIL_PAGES] = str(at.page)
            return detail
        # Last, and before the caller's DONE: a manifest means every item is accounted for.
        detail["manifest"] = self.manifest.write(attempt.key, status)
        # The job's whole charge, final now that nothing is pending: runs show adds it up.
        if status.tokens_charged is not None:
            detail[DETAIL_TOKENS] = str(status.tokens_charged)
        return detail

    def _get(self, key: JobKey, page: int) -> BatchStatus:
        if key.kind is JobKind.BATCH:
            return self._client.get_batch(key.job_id, page=page, page_size=BATCH_PAGE_SIZE)
        return self._client.get_crawl(key.job_id, page=page, page_size=BATCH_PAGE_SIZE)

    def _store_page(
        self, key: JobKey, at: _Position, status: BatchStatus, retries: _Retries
    ) -> _PageDone:
        """One page's items from ``at.item``; the deadline stops it after one item at least."""
        done = _PageDone()
        deadline = retries.attempt.deadline
        for position, item in enumerate(status.page.items[at.item :], start=at.item):
            if position > at.item and deadline is not None and deadline.near():
                done.stopped_at = position
                return done
            index = (
                item.input_index
                if item.input_index is not None
                else (at.page - 1) * BATCH_PAGE_SIZE + position
            )
            self._store_item(key, item, index, done, retries)
        return done

    def _store_item(
        self, key: JobKey, item: BatchItem, index: int, done: _PageDone, retries: _Retries
    ) -> None:
        if item.status == ApiStatus.COMPLETED:
            stored = self._results.store(
                key.kind, key.job_id, item.data, metadata_of(item.raw), item=index
            )
            done.records.append(ItemRecord.of(item, index, ItemStatus.STORED, stored.keys))
        elif item.status == ApiStatus.FAILED:
            if not self._retried(key, item, index, done, retries):
                where = self._results.dead_letter(
                    key.kind,
                    key.job_id,
                    {"url": item.url, "code": item.error_code, "message": item.error_message},
                    item=index,
                )
                done.records.append(ItemRecord.of(item, index, ItemStatus.DEAD_LETTERED, [where]))
        elif item.status == ApiStatus.CANCELLED:
            done.records.append(ItemRecord.of(item, index, ItemStatus.CANCELLED))
        else:
            done.pending = True

    def _retried(
        self, key: JobKey, item: BatchItem, index: int, done: _PageDone, retries: _Retries
    ) -> bool:
        """Resubmit a retryably failed item as a linked extract job; False when not retried."""
        retrier, status = retries.retrier, retries.status
        if retrier is None or status is None or not is_retryable(item, self._retryable_codes):
            return False
        ref = RetryRef(key, index)
        job_id = retrier.retry(
            ref, item, status=status, attempt=retries.attempt, noted=retries.noted
        )
        if job_id is None:
            return False
        retries.noted[index] = job_id
        record = ItemRecord.of(item, index, ItemStatus.RETRYING, retry_job=job_id)
        done.records.append(record)
        return True

    def _checkpoint(self, attempt: Attempt, at: _Position) -> None:
        """Record the pages (and items) done so far: progress, which clears the strikes."""
        page_seconds = attempt.row.page_seconds
        if attempt.deadline is not None:
            attempt.deadline.end_page()
            page_seconds = attempt.deadline.longest_page or page_seconds
        self._ledger.checkpoint(
            attempt.key,
            attempt.owner,
            next_page=at.page,
            stored=at.stored,
            failed=at.failed,
            page_seconds=page_seconds,
            next_item=at.item,
            cancelled=at.cancelled,
        )


def _begin_page(attempt: Attempt) -> None:
    """A page is next: out of time unless it fits, timed from now if it does."""
    if attempt.deadline is not None:
        if not attempt.deadline.room_for_page(attempt.row.page_seconds):
            raise OutOfTimeError
        attempt.deadline.start_page()
