"""Typed results of the Geonode API: frozen dataclasses read leniently from the JSON answers.

Every model keeps the whole answer in ``raw`` so fields the contract does not name yet
are never lost; readers tolerate missing fields because several shapes are unpublished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` or offset) as an aware datetime; None when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime | float) -> str:
    """A UTC ISO 8601 timestamp with a ``Z`` suffix, as the API writes them."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass(frozen=True)
class SubmittedJob:
    """The 202 answer to an async extract, a batch or a crawl."""

    job_id: str
    status: str
    status_url: str | None
    estimated_tokens: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> SubmittedJob:
        return cls(
            job_id=str(body["job_id"]),
            status=str(body.get("status", "queued")),
            status_url=body.get("status_url"),
            estimated_tokens=body.get("estimated_tokens"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class ExtractResult:
    """The 200 answer of a synchronous extract."""

    data: dict[str, Any]
    metadata: dict[str, Any]
    tokens_charged: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> ExtractResult:
        return cls(
            data=_dict(body.get("data")),
            metadata=_dict(body.get("metadata")),
            tokens_charged=body.get("tokens_charged"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class JobError:
    """Why a job failed, and whether trying again may help."""

    code: str
    message: str
    retryable: bool
    details: dict[str, Any]

    @classmethod
    def from_api(cls, body: Any) -> JobError | None:
        if not isinstance(body, Mapping):
            return None
        return cls(
            code=str(body.get("code", "")),
            message=str(body.get("message", "")),
            retryable=bool(body.get("retryable", False)),
            details=_dict(body.get("details")),
        )


@dataclass(frozen=True)
class Job:
    """An extract job as ``GET /v1/extract/{job_id}`` returns it."""

    job_id: str
    status: str
    created_at: datetime | None
    completed_at: datetime | None
    data: dict[str, Any]
    metadata: dict[str, Any]
    error: JobError | None
    tokens_charged: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled: the status will never change again."""
        return self.status in TERMINAL_STATUSES

    @property
    def url(self) -> str | None:
        """The URL the job scraped, from its metadata."""
        url = self.metadata.get("url")
        return url if isinstance(url, str) else None

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Job:
        return cls(
            job_id=str(body["job_id"]),
            status=str(body.get("status", "")),
            created_at=parse_time(body.get("created_at")),
            completed_at=parse_time(body.get("completed_at")),
            data=_dict(body.get("data")),
            metadata=_dict(body.get("metadata")),
            error=JobError.from_api(body.get("error")),
            tokens_charged=body.get("tokens_charged"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class JobSummary:
    """One row of ``GET /v1/extract/jobs``."""

    job_id: str
    status: str
    url: str | None
    created_at: datetime | None
    execution_time: Any
    output: Any
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> JobSummary:
        return cls(
            job_id=str(body["job_id"]),
            status=str(body.get("status", "")),
            url=body.get("url"),
            created_at=parse_time(body.get("created_at")),
            execution_time=body.get("execution_time"),
            output=body.get("output"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class Page[T]:
    """One page of a paged listing."""

    items: list[T]
    page: int
    page_size: int
    page_count: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_last(self) -> bool:
        """No page after this one."""
        return self.page >= self.page_count


@dataclass(frozen=True)
class BatchItem:
    """One URL of a batch, or one page of a crawl."""

    input_index: int | None
    url: str | None
    status: str
    error_code: str | None
    error_message: str | None
    data: dict[str, Any]
    metadata: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> BatchItem:
        index = body.get("input_index")
        return cls(
            input_index=index if isinstance(index, int) else None,
            url=body.get("url"),
            status=str(body.get("status", "")),
            error_code=body.get("error_code"),
            error_message=body.get("error_message"),
            data=_dict(body.get("data")),
            metadata=_dict(body.get("metadata")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class BatchStatus:
    """A batch or crawl with its counters and one page of its items."""

    job_id: str
    status: str
    counters: dict[str, int]
    page: Page[BatchItem]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_api(cls, body: Mapping[str, Any], *, page: int | None = None) -> BatchStatus:
        """``page`` is the page that was asked for: it numbers the answer, whatever ``page`` the
        answer echoes (or leaves out); without it the echo is read, and a missing one is 1."""
        counters = {
            k: v
            for k, v in body.items()
            if (k.endswith("_urls") or k.endswith("_pages")) and isinstance(v, int)
        }
        items = [BatchItem.from_api(i) for i in body.get("items") or [] if isinstance(i, Mapping)]
        items_page = Page(
            items=items,
            page=page if page is not None else _int(body.get("page"), 1),
            page_size=_int(body.get("page_size"), len(items)),
            page_count=_int(body.get("page_count"), 1),
            raw=dict(body),
        )
        job_id = body.get("job_id") or body.get("id")
        if not job_id:
            # As for an extract job: an answer that does not say which job it is cannot be
            # acted on (the processor counts it a failed attempt, a poison job if it persists).
            raise ValueError("batch or crawl answer without job_id")
        return cls(
            job_id=str(job_id),
            status=str(body.get("status", "")),
            counters=counters,
            page=items_page,
            raw=dict(body),
        )


@dataclass(frozen=True)
class CrawlCancel:
    """The answer to ``DELETE /v1/crawl/{id}``."""

    job_id: str
    status: str
    in_flight_pages: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> CrawlCancel:
        return cls(
            job_id=str(body.get("job_id", "")),
            status=str(body.get("status", "")),
            in_flight_pages=_int(body.get("in_flight_pages")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class Webhook:
    """A webhook subscription; ``secret`` is set only on create (and never shown in repr)."""

    id: str
    url: str
    event_type: str
    is_active: bool
    description: str | None
    created_at: datetime | None
    updated_at: datetime | None
    secret: str | None = field(default=None, repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Webhook:
        raw = {k: v for k, v in body.items() if k != "secret"}
        return cls(
            id=str(body["id"]),
            url=str(body.get("url", "")),
            event_type=str(body.get("event_type", "")),
            is_active=bool(body.get("is_active", True)),
            description=body.get("description"),
            created_at=parse_time(body.get("created_at")),
            updated_at=parse_time(body.get("updated_at")),
            secret=body.get("secret"),
            raw=raw,
        )


@dataclass(frozen=True)
class Delivery:
    """One delivery attempt from a subscription's delivery log."""

    id: str
    event_type: str
    job_id: str
    attempt_number: int
    status: str
    http_status: int | None
    delivered_at: datetime | None
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        """The receiver answered 2xx."""
        return self.http_status is not None and 200 <= self.http_status < 300

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Delivery:
        http_status = body.get("http_status")
        return cls(
            id=str(body.get("id", "")),
            event_type=str(body.get("event_type", "")),
            job_id=str(body.get("job_id", "")),
            attempt_number=_int(body.get("attempt_number"), 1),
            status=str(body.get("status", "")),
            http_status=http_status if isinstance(http_status, int) else None,
            delivered_at=parse_time(body.get("delivered_at")),
            created_at=parse_time(body.get("created_at")),
            raw=dict(body),
        )
