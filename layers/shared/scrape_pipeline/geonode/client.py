"""The Geonode Scraper API's endpoints (contract: docs/geonode-api.md), typed; the HTTP core,
retries included, is ``transport.Transport``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from scrape_pipeline.geonode.fields import Answer, objects
from scrape_pipeline.geonode.models import (
    BatchItem,
    BatchStatus,
    Job,
    JobSummary,
    Page,
    SubmittedJob,
)
from scrape_pipeline.geonode.transport import API_KEY_ENV, DateLike, Transport

if TYPE_CHECKING:  # the processor, which loads this client, never reads the webhook answers
    from scrape_pipeline.geonode.webhooks import Delivery, Webhook

__all__ = ["API_KEY_ENV", "BATCH_PAGE_MAX", "DELIVERIES_PAGE_MAX", "JOBS_PAGE_MAX", "GeonodeClient"]

JOBS_PAGE_MAX: Final = 100
BATCH_PAGE_MAX: Final = 50
DELIVERIES_PAGE_MAX: Final = 100
MARKDOWN: Final = ("markdown",)
Formats = Sequence[str]


class GeonodeClient(Transport):
    """Every endpoint of the Geonode Scraper API, with typed results and safe retries."""

    def submit_extract(
        self, url: str, *, formats: Formats = MARKDOWN, render_js: bool = False, **options: Any
    ) -> SubmittedJob:
        """Start an asynchronous extract job; the answer carries its ``job_id``."""
        body = job_body(url, formats, render_js, options, processing_mode="async")
        return SubmittedJob.from_api(self._post("/v1/extract", body))

    def get_job(self, job_id: str) -> Job:
        """The job's current state (may be 404 briefly right after submission)."""
        return Job.from_api(self._get(f"/v1/extract/{segment(job_id)}"))

    def list_jobs(
        self, *, page: int = 1, page_size: int = JOBS_PAGE_MAX, **filters: DateLike | None
    ) -> Page[JobSummary]:
        """One page of the account's jobs, newest first; ``filters``: ``status``, ``url``,
        ``job_id``, ``output``, ``start_date``, ``end_date`` (None: not filtered)."""
        body = self._get(
            "/v1/extract/jobs", page=page, page_size=min(page_size, JOBS_PAGE_MAX), **filters
        )
        # items: the seed article's name for the same list
        return Page.from_api(body, _rows(body, JobSummary, "jobs", "items"))

    def iter_jobs(self, **filters: Any) -> Iterator[JobSummary]:
        """Every job matching ``filters`` across all pages, each once (newest first: a job
        created while paging pushes rows down, repeating them)."""
        seen: set[str] = set()
        for job in self._each(lambda n: self.list_jobs(page=n, **filters)):
            if job.job_id not in seen:
                seen.add(job.job_id)
                yield job

    def create_batch(
        self,
        urls: Iterable[str],
        *,
        formats: Formats = MARKDOWN,
        render_js: bool = False,
        ignore_invalid_urls: bool = True,
        **options: Any,
    ) -> SubmittedJob:
        """Submit up to 1,000 URLs as one batch job."""
        body = {
            "urls": list(urls),
            "formats": list(formats),
            "render_js": render_js,
            "ignore_invalid_urls": ignore_invalid_urls,
            **options,
        }
        return SubmittedJob.from_api(self._post("/v1/batch", body))

    def get_batch(self, batch_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        """The batch's counters and one page of its items."""
        return self._paged_job("batch", batch_id, page, page_size)

    def iter_batch_items(self, batch_id: str) -> Iterator[BatchItem]:
        """Every item of a batch, page by page."""
        return self._items("batch", batch_id)

    def _items(self, kind: str, job_id: str) -> Iterator[BatchItem]:
        return self._each(lambda n: self._paged_job(kind, job_id, n, BATCH_PAGE_MAX).page)

    def _paged_job(self, kind: str, job_id: str, page: int, page_size: int) -> BatchStatus:
        # Batches and crawls share one paged shape: counters plus a page of items.
        body = self._get(
            f"/v1/{kind}/{segment(job_id)}", page=page, page_size=min(page_size, BATCH_PAGE_MAX)
        )
        return BatchStatus.from_api(body, page=page)

    def create_crawl(
        self, url: str, *, formats: Formats = MARKDOWN, render_js: bool = False, **options: Any
    ) -> SubmittedJob:
        """Start a crawl from ``url`` (limits such as ``max_pages`` pass through ``options``)."""
        return SubmittedJob.from_api(
            self._post("/v1/crawl", job_body(url, formats, render_js, options))
        )

    def get_crawl(self, crawl_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        """The crawl's counters and one page of its pages."""
        return self._paged_job("crawl", crawl_id, page, page_size)

    def list_webhooks(self) -> list[Webhook]:
        """Every subscription of the account."""
        from scrape_pipeline.geonode.webhooks import Webhook  # noqa: PLC0415 - see the top

        return _rows(self._get("/v1/webhooks"), Webhook, "webhooks", "items", "data")

    def list_deliveries(
        self,
        webhook_id: str,
        *,
        status: str | None = None,
        page: int = 1,
        page_size: int = DELIVERIES_PAGE_MAX,
    ) -> Page[Delivery]:
        """One page of a subscription's delivery attempts."""
        from scrape_pipeline.geonode.webhooks import Delivery  # noqa: PLC0415 - see the top

        body = self._get(
            f"/v1/webhooks/{segment(webhook_id)}/deliveries",
            status=status,
            page=page,
            page_size=min(page_size, DELIVERIES_PAGE_MAX),
        )
        return Page.from_api(body, _rows(body, Delivery, "items", "deliveries"))

    def iter_deliveries(
        self, webhook_id: str, *, status: str | None = None, start_page: int = 1
    ) -> Iterator[Delivery]:
        """Every delivery attempt of a subscription, page by page from ``start_page``."""
        fetch = lambda n: self.list_deliveries(webhook_id, status=status, page=n)  # noqa: E731
        return self._each(fetch, start_page)

    @staticmethod
    def _each[T](fetch: Callable[[int], Page[T]], start: int = 1) -> Iterator[T]:
        """The items of the pages ``fetch`` reads, from page ``start`` to the last."""
        number = start
        while True:
            page = fetch(number)
            yield from page.items
            if page.is_last or not page.items:
                return
            number += 1


def _rows[A: Answer](body: Any, kind: type[A], *names: str) -> list[A]:
    """The answer's list read as ``kind``: under the first of ``names`` it has, or the answer."""
    if isinstance(body, Mapping):
        body = next((body[n] for n in names if body.get(n) is not None), [])
    return [kind.from_api(row) for row in objects(body)]


def segment(value: str) -> str:
    """A path segment that cannot escape its route (ids come from webhooks: untrusted)."""
    if value in {"", ".", ".."}:
        raise ValueError("an id must be a non-empty path segment")
    return quote(value, safe="")


def job_body(
    url: str,
    formats: Formats,
    render_js: bool,
    options: Mapping[str, Any],
    **fixed: str,
) -> dict[str, Any]:
    """What an extract or a crawl sends: ``fixed`` (its processing mode) over ``options``."""
    return {"url": url, "formats": list(formats), "render_js": render_js, **options, **fixed}
