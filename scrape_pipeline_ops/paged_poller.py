"""Following batches and crawls until they settle, then reading every item of each once.

The API lists neither, so each is asked about directly; its items come 50 a page:

    round:  GET page 1 of every outstanding job (its counters say what is still pending)
            -> settled (a terminal status, nothing pending) -> GET its other pages -> yield
            -> wait: the shortest interval after a round that found work, doubling when idle
    a job answered 404 is asked about again every round and given up as unknown once
    ``not_found_grace`` has passed since its creation (as the many-jobs poller does).

A cancelled job is settled only once its in-flight items have drained, as the pipeline's
processor has it. All requests share one ``RateBudget``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

from scrape_pipeline.geonode.client import BATCH_PAGE_MAX
from scrape_pipeline.geonode.errors import (
    GeonodeError,
    NotFoundError,
    RateLimitedError,
)
from scrape_pipeline.geonode.fields import as_int
from scrape_pipeline.geonode.models import BatchItem, BatchStatus
from scrape_pipeline.jobs import JobKind
from scrape_pipeline_ops.many_poller import RoundsPoller


@dataclass(frozen=True)
class PagedJob:
    """A settled batch or crawl with all its items (a crawl's: its pages)."""

    kind: JobKind
    job_id: str
    status: str
    items: list[BatchItem]
    tokens_charged: int | None

    def numbered(self) -> Iterator[tuple[int, BatchItem]]:
        """Each item with its number: the API's ``input_index``, else its place in the job
        (as the pipeline numbers a stored item's folder)."""
        for position, item in enumerate(self.items):
            yield (position if item.input_index is None else item.input_index), item


def tokens_of(last: BatchStatus, items: list[BatchItem]) -> int | None:
    """The job's charge: its ``token_summary``, else the sum of its items' ``tokens_charged``."""
    if last.tokens_charged is not None:
        return last.tokens_charged
    charges = [as_int(item.metadata.get("tokens_charged"), -1) for item in items]
    counted = [charge for charge in charges if charge >= 0]
    return sum(counted) if counted else None


@dataclass
class _Tracked:
    kind: JobKind
    created_at: float
    not_found: bool = False


class PagedJobsPoller(RoundsPoller[_Tracked]):
    """Track batches and crawls and yield each exactly once, with its items, when it settles."""

    def track(self, kind: JobKind, job_id: str, created_at: float | None = None) -> None:
        """Follow a batch or crawl; ``created_at`` (for the 404 grace) defaults to now."""
        if kind is JobKind.EXTRACT:
            raise ValueError("extract jobs are followed by the many-jobs poller")
        created = self._clock.time() if created_at is None else created_at
        self._jobs.setdefault(job_id, _Tracked(kind, created))

    def run(
        self, *, max_wait: float = 3600.0, on_unknown: Callable[[str], None] | None = None
    ) -> Iterator[PagedJob]:
        """Yield every tracked job once, as it settles; ``JobTimeoutError`` after ``max_wait``.

        A job given up as unknown is not yielded: ``on_unknown(job_id)`` is called.
        """
        started = self._clock.monotonic()
        interval = self.settings.min_interval
        while self._jobs:
            settled, retry_after = yield from self._round(on_unknown)
            if not self._jobs:
                return
            elapsed = self._clock.monotonic() - started
            interval = self._pause(
                interval,
                found=settled > 0,
                elapsed=elapsed,
                max_wait=max_wait,
                retry_after=retry_after,
            )

    def _round(
        self, on_unknown: Callable[[str], None] | None
    ) -> Generator[PagedJob, None, tuple[int, float | None]]:
        """One look at every outstanding job: yields those settled; returns how many settled
        and the longest ``Retry-After`` the API asked for."""
        settled = 0
        retry_after: float | None = None
        for job_id, tracked in list(self._jobs.items()):
            try:
                job = self._settled(tracked.kind, job_id)
            except NotFoundError:
                if self._clock.time() - tracked.created_at >= self.settings.not_found_grace:
                    del self._jobs[job_id]
                    self.unknown.append(job_id)
                    if on_unknown is not None:
                        on_unknown(job_id)
                continue
            except RateLimitedError as exc:
                # The client already retried: give the API room, the whole round later.
                retry_after = max(retry_after or 0.0, exc.retry_after or 0.0) or None
                break
            except GeonodeError:
                continue  # still tracked: the next round asks again
            if job is not None:
                del self._jobs[job_id]
                settled += 1
                yield job
        return settled, retry_after

    def _page(self, kind: JobKind, job_id: str, page: int) -> BatchStatus:
        self._budget.acquire()
        if kind is JobKind.BATCH:
            return self._client.get_batch(job_id, page=page, page_size=BATCH_PAGE_MAX)
        return self._client.get_crawl(job_id, page=page, page_size=BATCH_PAGE_MAX)

    def _settled(self, kind: JobKind, job_id: str) -> PagedJob | None:
        """The job with every item once it has settled, else None (after one GET)."""
        status = self._page(kind, job_id, 1)
        items: list[BatchItem] = []
        while True:
            if not status.is_terminal or status.pending:
                return None  # a cancelled job drains its in-flight items first
            items += status.page.items
            if status.page.is_last or not status.page.items:
                break
            status = self._page(kind, job_id, status.page.page + 1)
        if any(not item.is_terminal for item in items):
            return None  # the counters lagged an item: read it all again next round
        return PagedJob(kind, job_id, str(status.status), items, tokens_of(status, items))
