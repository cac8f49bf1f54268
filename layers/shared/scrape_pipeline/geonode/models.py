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
