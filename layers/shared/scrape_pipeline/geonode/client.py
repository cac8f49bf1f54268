"""HTTP client for the Geonode Scraper API (contract: shared/docs/geonode-api.md), on httpx.

Retries are decided in one place (``_send``): a read (GET) is retried on 429, 5xx, 408 and
network errors; a request that creates or changes something is retried only when the API
certainly did not act on it (429, or the connection was never made), never after a timeout.
"""

from __future__ import annotations

import email.utils
import itertools
import os
import random
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.errors import (
    TRANSIENT_STATUSES,
    APIError,
    GeonodeError,
    MissingAPIKeyError,
    RateLimitedError,
    TransportError,
    error_class_for,
)
from scrape_pipeline.geonode.models import (
    BatchItem,
    BatchStatus,
    CrawlCancel,
    Delivery,
    ExtractResult,
    Job,
    JobSummary,
    Page,
    SubmittedJob,
    Webhook,
    format_time,
)
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.settings import GEONODE_SCRAPER_API_KEY, GeonodeSettings

API_KEY_ENV = GEONODE_SCRAPER_API_KEY.name
API_KEY_HEADER = "X-Api-Key"
USER_AGENT = "scrape-pipeline/0.1"
JOBS_PAGE_MAX = 100
BATCH_PAGE_MAX = 50
DELIVERIES_PAGE_MAX = 100
_READ_METHODS = frozenset({"GET", "HEAD"})

DateLike = datetime | str | float


def _date_param(value: DateLike) -> str:
    return value if isinstance(value, str) else format_time(value)


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones; dates in the API's format."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        out[key] = _date_param(value) if key.endswith("_date") else value
    return out


def _retry_after(response: httpx.Response, now: float) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    raw = response.headers.get("Retry-After")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def _api_error(response: httpx.Response, now: float) -> APIError:
    """Read either error shape of the contract (top level, or nested under ``error``)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    fields: Mapping[str, Any] = {}
    if isinstance(body, Mapping):
        nested = body.get("error")
        fields = nested if isinstance(nested, Mapping) else body
    code = fields.get("code")
    message = fields.get("message")
    detail = body.get("detail") if isinstance(body, Mapping) else None
    if isinstance(detail, list) and message is None:
        code = code or "VALIDATION_ERROR"
        message = "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg', '')}"
            for d in detail
            if isinstance(d, Mapping)
        )
    elif isinstance(detail, str) and message is None:
        message = detail
    retryable = fields.get("retryable")
    if not isinstance(retryable, bool):
        retryable = response.status_code in TRANSIENT_STATUSES
    correlation_id = (
        fields.get("correlation_id")
        or response.headers.get("X-Correlation-Id")
        or response.headers.get("X-Request-Id")
    )
    cls = error_class_for(response.status_code)
    kwargs: dict[str, Any] = {
        "code": str(code) if code is not None else None,
        "message": str(message)[:500] if message is not None else None,
        "retryable": retryable,
        "correlation_id": str(correlation_id) if correlation_id else None,
        "body": body,
    }
    if cls is RateLimitedError:
        return RateLimitedError(
            response.status_code, retry_after=_retry_after(response, now), **kwargs
        )
    return cls(response.status_code, **kwargs)


_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")
_CAUSES: dict[type[httpx.HTTPError], str] = {
    httpx.ConnectTimeout: "no connection in time",
    httpx.ReadTimeout: "no answer in time",
    httpx.WriteTimeout: "could not send in time",
    httpx.PoolTimeout: "no free connection in time",
}


def _cause(exc: httpx.HTTPError) -> str:
    """Why the network failed, in a few words ("connection refused"), never a header."""
    if type(exc) in _CAUSES:
        return _CAUSES[type(exc)]
    seen: BaseException | None = exc
    while seen is not None:  # the socket's own error says it best (refused, unknown name)
        if isinstance(seen, OSError) and seen.strerror:
            text = seen.strerror
            break
        seen = seen.__cause__ or seen.__context__
    else:
        text = str(exc)
    text = _ERRNO.sub("", " ".join(text.split()))[:120]
    return (text[:1].lower() + text[1:]) or "no detail"


def _transport_error(exc: httpx.HTTPError, method: str, path: str, host: str) -> TransportError:
    """The one place httpx's errors become ours; says whether the request may have been acted on.

    The message names the host and the cause: ``GET /v1/webhooks: cannot reach
    scraper.geonode.io: connection refused (ConnectError)``.
    """
    # No connection was made: the API cannot have seen the request, so even a POST is safe again.
    never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    kind = type(exc).__name__
    where = f"cannot reach {host}" if never_sent else host
    return TransportError(
        f"{method} {path}: {where}: {_cause(exc)} ({kind})", request_sent=not never_sent
    )


class GeonodeClient:
    """Every endpoint of the Geonode Scraper API, with typed results and safe retries.

    The key comes from ``api_key`` or ``GEONODE_SCRAPER_API_KEY`` and is never part of a repr,
    a log line or an error message. Thread-safe: one client can serve many pollers.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        settings: GeonodeSettings | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        transport: httpx.BaseTransport | None = None,
        connect_timeout: float | None = None,
        refresh_key: Callable[[], str | None] | None = None,
    ) -> None:
        """``connect_timeout``: seconds to make a connection (default: the whole timeout).

        ``refresh_key``: called on a 401 for a key read anew (None: none to offer); a request
        refused with the old key is sent once more with a new one (a 401 did nothing).
        """
        settings = settings or GeonodeSettings.from_env()
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise MissingAPIKeyError(f"no API key: pass api_key or set {API_KEY_ENV}")
        self.base_url = (base_url or settings.base_url).rstrip("/")
        self._host = httpx.URL(self.base_url).netloc.decode("ascii", "replace")
        self.retry = retry or RetryPolicy(
            max_attempts=settings.retry_max_attempts,
            base_delay=settings.retry_base_delay,
            max_delay=settings.retry_max_delay,
            deadline=settings.retry_deadline,
        )
        self._clock = clock
        self._rng = rng or random.Random()  # jitter only, not security
        self._rng_lock = threading.Lock()
        self._sent = itertools.count()
        self._requests_sent = 0
        self._refresh_key = refresh_key
        self._key_lock = threading.Lock()
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={API_KEY_HEADER: key, "User-Agent": USER_AGENT, "Accept": "application/json"},
            timeout=httpx.Timeout(
                settings.timeout_seconds, connect=connect_timeout or settings.timeout_seconds
            ),
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"GeonodeClient(base_url={self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent so far, retries included (what the API bills and rate-limits)."""
        return self._requests_sent

    # -- transport -------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
    ) -> httpx.Response:
        is_read = method in _READ_METHODS
        started = self._clock.monotonic()
        attempt = 0
        key_renewed = False
        while True:
            attempt += 1
            error: GeonodeError
            self._requests_sent = next(self._sent) + 1
            sent_with = self._http.headers.get(API_KEY_HEADER)
            try:
                response = self._http.request(method, path, params=params, json=json)
            except httpx.HTTPError as exc:
                error = _transport_error(exc, method, path, self._host)
                error.__cause__ = exc
            else:
                if response.is_success:
                    return response
                error = _api_error(response, self._clock.time())
                if response.status_code == 401 and not key_renewed and self._renew_key(sent_with):
                    key_renewed = True  # once per request: a wrong new key is not chased
                    continue
            error.attempts = attempt
            if not self._may_retry(error, is_read) or attempt >= self._attempts_for(error):
                raise error
            retry_after = error.retry_after if isinstance(error, RateLimitedError) else None
            with self._rng_lock:
                wait = self.retry.backoff(attempt - 1, self._rng, retry_after)
            if self._clock.monotonic() - started + wait > self.retry.deadline:
                raise error
            self._clock.sleep(wait)

    def _renew_key(self, refused: str | None) -> bool:
        """After a 401 for ``refused``: True when there is another key to send the request with.

        Another thread may have renewed it already; else ``refresh_key`` is asked for one.
        """
        if self._refresh_key is None:
            return False
        with self._key_lock:
            if self._http.headers.get(API_KEY_HEADER) != refused:
                return True
            key = self._refresh_key()
            if not key or key == refused:
                return False
            self._http.headers[API_KEY_HEADER] = key
            return True

    def _attempts_for(self, error: GeonodeError) -> int:
        if isinstance(error, TransportError) and not error.request_sent:
            return min(self.retry.connect_attempts, self.retry.max_attempts)
        return self.retry.max_attempts

    @staticmethod
    def _may_retry(error: GeonodeError, is_read: bool) -> bool:
        if isinstance(error, RateLimitedError):
            return True  # throttled requests were not acted on
        if isinstance(error, TransportError):
            return is_read or not error.request_sent
        if isinstance(error, APIError):
            return is_read and error.status_code in TRANSIENT_STATUSES
        return False

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise APIError(
                response.status_code, code="INVALID_RESPONSE", message="answer is not JSON"
            ) from exc

    def _get(self, path: str, **params: Any) -> Any:
        return self._json(self._send("GET", path, params=_params(**params)))

    def _post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return self._json(self._send("POST", path, json=dict(body) if body is not None else None))

    # -- extraction ------------------------------------------------------------------------

    def extract_sync(
        self,
        url: str,
        *,
        formats: Sequence[str] = ("markdown",),
        render_js: bool = False,
        **options: Any,
    ) -> ExtractResult:
        """Scrape ``url`` and wait for the result (``processing_mode: sync``)."""
        body = {"url": url, "formats": list(formats), "render_js": render_js, **options}
        body["processing_mode"] = "sync"
        return ExtractResult.from_api(self._post("/v1/extract", body))

    def submit_extract(
        self,
        url: str,
        *,
        formats: Sequence[str] = ("markdown",),
        render_js: bool = False,
        **options: Any,
    ) -> SubmittedJob:
        """Start an asynchronous extract job; the answer carries its ``job_id``."""
        body = {"url": url, "formats": list(formats), "render_js": render_js, **options}
        body["processing_mode"] = "async"
        return SubmittedJob.from_api(self._post("/v1/extract", body))

    def get_job(self, job_id: str) -> Job:
        """The job's current state (may be 404 briefly right after submission)."""
        return Job.from_api(self._get(f"/v1/extract/{_segment(job_id)}"))

    def list_jobs(
        self,
        *,
        status: str | None = None,
        url: str | None = None,
        job_id: str | None = None,
        output: str | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        page: int = 1,
        page_size: int = JOBS_PAGE_MAX,
    ) -> Page[JobSummary]:
        """One page of the account's jobs, newest first."""
        body = self._get(
            "/v1/extract/jobs",
            status=status,
            url=url,
            job_id=job_id,
            output=output,
            start_date=start_date,
            end_date=end_date,
            page=page,
            page_size=min(page_size, JOBS_PAGE_MAX),
        )
        rows = body.get("jobs")
        if rows is None:
            rows = body.get("items") or []  # the seed article's name for the same list
        return _page(body, [JobSummary.from_api(r) for r in rows if isinstance(r, Mapping)])

    def iter_jobs(self, **filters: Any) -> Iterator[JobSummary]:
        """Every job matching ``filters`` across all pages, each once.

        The list is newest first, so a job created while paging pushes rows down a page:
        rows can repeat, never vanish. Repeats are dropped here.
        """
        seen: set[str] = set()
        for page in self._pages(lambda n: self.list_jobs(page=n, **filters)):
            for job in page.items:
                if job.job_id not in seen:
                    seen.add(job.job_id)
                    yield job

    # -- batches and crawls ----------------------------------------------------------------

    def create_batch(
        self,
        urls: Iterable[str],
        *,
        formats: Sequence[str] = ("markdown",),
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

    def _paged_job(self, kind: str, job_id: str, page: int, page_size: int) -> BatchStatus:
        # Batches and crawls share one paged shape: counters plus a page of items.
        body = self._get(
            f"/v1/{kind}/{_segment(job_id)}", page=page, page_size=min(page_size, BATCH_PAGE_MAX)
        )
        return BatchStatus.from_api(body, page=page)

    def _items(self, kind: str, job_id: str) -> Iterator[BatchItem]:
        fetch = lambda n: self._paged_job(kind, job_id, n, BATCH_PAGE_MAX)  # noqa: E731
        for status in self._pages(fetch):
            yield from status.page.items

    def create_crawl(
        self,
        url: str,
        *,
        formats: Sequence[str] = ("markdown",),
        render_js: bool = False,
        **options: Any,
    ) -> SubmittedJob:
        """Start a crawl from ``url`` (limits such as ``max_pages`` pass through ``options``)."""
        body = {"url": url, "formats": list(formats), "render_js": render_js, **options}
        return SubmittedJob.from_api(self._post("/v1/crawl", body))

    def get_crawl(self, crawl_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        """The crawl's counters and one page of its pages."""
        return self._paged_job("crawl", crawl_id, page, page_size)

    def iter_crawl_items(self, crawl_id: str) -> Iterator[BatchItem]:
        """Every page of a crawl, page by page."""
        return self._items("crawl", crawl_id)

    def cancel_crawl(self, crawl_id: str) -> CrawlCancel:
        """Stop scheduling new pages; in-flight pages drain. 409 when already finished."""
        body = self._json(self._send("DELETE", f"/v1/crawl/{_segment(crawl_id)}"))
        return CrawlCancel.from_api(body)

    # -- webhooks --------------------------------------------------------------------------

    def create_webhook(
        self, url: str, event_type: str, *, description: str | None = None
    ) -> Webhook:
        """Subscribe ``url`` to one event type; the answer's ``secret`` is shown only now."""
        body: dict[str, Any] = {"url": url, "event_type": event_type}
        if description is not None:
            body["description"] = description
        return Webhook.from_api(self._post("/v1/webhooks", body))

    def list_webhooks(self) -> list[Webhook]:
        """Every subscription of the account."""
        body = self._get("/v1/webhooks")
        rows = body
        if isinstance(body, Mapping):
            rows = body.get("webhooks") or body.get("items") or body.get("data") or []
        return [Webhook.from_api(r) for r in rows if isinstance(r, Mapping)]

    def get_webhook(self, webhook_id: str) -> Webhook:
        """One subscription."""
        return Webhook.from_api(self._get(f"/v1/webhooks/{_segment(webhook_id)}"))

    def update_webhook(
        self,
        webhook_id: str,
        *,
        is_active: bool | None = None,
        url: str | None = None,
        description: str | None = None,
    ) -> Webhook:
        """Change a subscription; ``is_active=False`` disables it."""
        body = _params(is_active=is_active, url=url, description=description)
        response = self._send("PATCH", f"/v1/webhooks/{_segment(webhook_id)}", json=body)
        return Webhook.from_api(self._json(response))

    def delete_webhook(self, webhook_id: str) -> None:
        """Remove a subscription."""
        self._send("DELETE", f"/v1/webhooks/{_segment(webhook_id)}")

    def rotate_webhook_secret(self, webhook_id: str) -> str:
        """A new secret; the previous one stops working at once on the sender's side."""
        body = self._post(f"/v1/webhooks/{_segment(webhook_id)}/rotate-secret")
        return str(body["secret"])

    def list_deliveries(
        self,
        webhook_id: str,
        *,
        status: str | None = None,
        page: int = 1,
        page_size: int = DELIVERIES_PAGE_MAX,
    ) -> Page[Delivery]:
        """One page of a subscription's delivery attempts."""
        body = self._get(
            f"/v1/webhooks/{_segment(webhook_id)}/deliveries",
            status=status,
            page=page,
            page_size=min(page_size, DELIVERIES_PAGE_MAX),
        )
        rows = body.get("items")
        if rows is None:
            rows = body.get("deliveries") or []
        return _page(body, [Delivery.from_api(r) for r in rows if isinstance(r, Mapping)])

    def iter_deliveries(
        self, webhook_id: str, *, status: str | None = None, start_page: int = 1
    ) -> Iterator[Delivery]:
        """Every delivery attempt of a subscription, page by page from ``start_page``."""
        pages = self._pages(
            lambda n: self.list_deliveries(webhook_id, status=status, page=n), start=start_page
        )
        for page in pages:
            yield from page.items

    # -- paging ----------------------------------------------------------------------------

    @staticmethod
    def _pages[P: (Page[Any], BatchStatus)](
        fetch: Callable[[int], P], start: int = 1
    ) -> Iterator[P]:
        number = start
        while True:
            result = fetch(number)
            yield result
            page = result.page if isinstance(result, BatchStatus) else result
            if page.is_last or not page.items:
                return
            number += 1


def _segment(value: str) -> str:
    """A path segment that cannot escape its route (ids come from webhooks: untrusted)."""
    if not value or value in {".", ".."}:
        raise ValueError("an id must be a non-empty path segment")
    return quote(value, safe="")


def _page[T](body: Mapping[str, Any], items: list[T]) -> Page[T]:
    page = body.get("page")
    page_size = body.get("page_size")
    page_count = body.get("page_count")
    return Page(
        items=items,
        page=page if isinstance(page, int) else 1,
        page_size=page_size if isinstance(page_size, int) else len(items),
        page_count=page_count if isinstance(page_count, int) else 1,
        raw=dict(body),
    )
