"""Typed results of the Geonode API, read leniently (several shapes are unpublished); each keeps
the whole answer in ``raw``, so no field the contract does not name yet is lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from scrape_pipeline.geonode.fields import (
    as_dict,
    as_int,
    int_or_none,
    objects,
    of_type,
    parse_time,
)


class ApiStatus(StrEnum):
    """A job's, batch's, crawl's or item's status; the last three never change again. Another
    value is kept as written (``read_status``): not terminal, so it is looked at again."""

    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATUSES: Final = frozenset({ApiStatus.COMPLETED, ApiStatus.FAILED, ApiStatus.CANCELLED})
_STATUS_BY_VALUE: Final[Mapping[str, ApiStatus]] = {s.value: s for s in ApiStatus}


def read_status(value: Any) -> ApiStatus | str:
    """The ``ApiStatus`` the API named, or its text as written when it names none of them."""
    text = str(value)
    return _STATUS_BY_VALUE.get(text, text)


class Settles:
    """What has a status: it is terminal once the status is one that never changes again."""

    status: ApiStatus | str

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled: the status will never change again."""
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class Page[T]:
    """One page of a paged listing, numbered as the answer says (or as it was asked for)."""

    items: list[T]
    page: int
    page_count: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_last(self) -> bool:
        return self.page >= self.page_count

    @classmethod
    def from_api(cls, body: Mapping[str, Any], items: list[T], page: int | None = None) -> Page[T]:
        """``items`` numbered as ``body`` says: ``page`` (the one asked for) over its echo."""
        return cls(
            items=items,
            page=page if page is not None else as_int(body.get("page"), 1),
            page_count=as_int(body.get("page_count"), 1),
            raw=dict(body),
        )


@dataclass(frozen=True)
class SubmittedJob:
    """The 202 answer to an async extract, a batch or a crawl."""

    job_id: str
    status: ApiStatus | str
    status_url: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> SubmittedJob:
        """Read the 202 answer; a status left out is ``queued``, as the contract says."""
        return cls(
            job_id=str(body["job_id"]),
            status=read_status(body.get("status", ApiStatus.QUEUED)),
            status_url=body.get("status_url"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class JobError:
    """Why a job failed, and whether trying again may help."""

    code: str
    message: str
    retryable: bool

    @classmethod
    def from_api(cls, body: Any) -> JobError | None:
        """None when the job has no ``error`` object."""
        if not isinstance(body, Mapping):
            return None
        return cls(
            code=str(body.get("code", "")),
            message=str(body.get("message", "")),
            retryable=bool(body.get("retryable", False)),
        )


@dataclass(frozen=True)
class Job(Settles):
    """An extract job as ``GET /v1/extract/{job_id}`` returns it."""

    job_id: str
    status: ApiStatus | str
    created_at: datetime | None
    completed_at: datetime | None
    data: dict[str, Any]
    metadata: dict[str, Any]
    error: JobError | None
    tokens_charged: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def url(self) -> str | None:
        return of_type(self.metadata.get("url"), str)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Job:
        """Read ``GET /v1/extract/{job_id}``; ``KeyError`` without a ``job_id``."""
        return cls(
            job_id=str(body["job_id"]),
            status=read_status(body.get("status", "")),
            created_at=parse_time(body.get("created_at")),
            completed_at=parse_time(body.get("completed_at")),
            data=as_dict(body.get("data")),
            metadata=as_dict(body.get("metadata")),
            error=JobError.from_api(body.get("error")),
            tokens_charged=body.get("tokens_charged"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class JobSummary(Settles):
    """One row of ``GET /v1/extract/jobs``."""

    job_id: str
    status: ApiStatus | str
    url: str | None
    created_at: datetime | None
    execution_time: Any
    output: Any
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> JobSummary:
        """Read one row of the job list; ``KeyError`` without a ``job_id``."""
        return cls(
            job_id=str(body["job_id"]),
            status=read_status(body.get("status", "")),
            url=body.get("url"),
            created_at=parse_time(body.get("created_at")),
            execution_time=body.get("execution_time"),
            output=body.get("output"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class BatchItem(Settles):
    """One URL of a batch, or one page of a crawl."""

    input_index: int | None
    url: str | None
    status: ApiStatus | str
    error_code: str | None
    error_message: str | None
    data: dict[str, Any]
    metadata: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> BatchItem:
        return cls(
            input_index=of_type(body.get("input_index"), int),
            url=body.get("url"),
            status=read_status(body.get("status", "")),
            error_code=body.get("error_code"),
            error_message=body.get("error_message"),
            data=as_dict(body.get("data")),
            metadata=as_dict(body.get("metadata")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class BatchStatus(Settles):
    """A batch or crawl with its counters and one page of its items."""

    job_id: str
    status: ApiStatus | str
    counters: dict[str, int]
    page: Page[BatchItem]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any], *, page: int | None = None) -> BatchStatus:
        """``page``, the page asked for, numbers the answer over its echo (none echoed: 1)."""
        items = [BatchItem.from_api(i) for i in objects(body.get("items") or [])]
        job_id = body.get("job_id") or body.get("id")
        if not job_id:
            # As for an extract job: an answer that does not say which job it is is no answer.
            raise ValueError("batch or crawl answer without job_id")
        return cls(
            job_id=str(job_id),
            status=read_status(body.get("status", "")),
            counters=_counters(body),
            page=Page.from_api(body, items, page),
            raw=dict(body),
        )

    @property
    def tokens_charged(self) -> int | None:
        """What the whole batch or crawl has cost so far (``token_summary``), if it says."""
        return int_or_none(as_dict(self.raw.get("token_summary")).get("tokens_charged_total"))

    @property
    def pending(self) -> int:
        """Items the counters say are still pending (0 when they say nothing)."""
        return sum(n for name, n in self.counters.items() if name.startswith("pending_"))


def _counters(body: Mapping[str, Any]) -> dict[str, int]:
    """The ``*_urls`` (batch) or ``*_pages`` (crawl) counts of a paged answer."""
    return {k: v for k, v in body.items() if k.endswith(("_urls", "_pages")) and isinstance(v, int)}


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
        """Read a subscription; its ``secret`` stays out of ``raw`` (which is logged)."""
        raw = dict(body)
        secret = raw.pop("secret", None)
        return cls(
            id=str(body["id"]),
            url=str(body.get("url", "")),
            event_type=str(body.get("event_type", "")),
            is_active=bool(body.get("is_active", True)),
            description=body.get("description"),
            created_at=parse_time(body.get("created_at")),
            updated_at=parse_time(body.get("updated_at")),
            secret=secret,
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
        return self.http_status is not None and 200 <= self.http_status < 300

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Delivery:
        return cls(
            id=str(body.get("id", "")),
            event_type=str(body.get("event_type", "")),
            job_id=str(body.get("job_id", "")),
            attempt_number=as_int(body.get("attempt_number"), 1),
            status=str(body.get("status", "")),
            http_status=of_type(body.get("http_status"), int),
            delivered_at=parse_time(body.get("delivered_at")),
            created_at=parse_time(body.get("created_at")),
            raw=dict(body),
        )
