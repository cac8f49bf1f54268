"""Typed results of the Geonode API, read leniently (several shapes are unpublished); each keeps
the whole answer in ``raw``, so no field the contract does not name yet is lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scrape_pipeline.geonode.batches import BatchItem, BatchStatus, CrawlCancel
from scrape_pipeline.geonode.fields import as_dict, format_time, of_type, parse_time
from scrape_pipeline.geonode.paging import Page
from scrape_pipeline.geonode.status import TERMINAL_STATUSES, ApiStatus, Settles, read_status
from scrape_pipeline.geonode.webhooks import Delivery, Webhook

__all__ = [
    "TERMINAL_STATUSES",
    "ApiStatus",
    "BatchItem",
    "BatchStatus",
    "CrawlCancel",
    "Delivery",
    "ExtractResult",
    "Job",
    "JobError",
    "JobSummary",
    "Page",
    "SubmittedJob",
    "Webhook",
    "format_time",
    "parse_time",
    "read_status",
]


@dataclass(frozen=True)
class SubmittedJob:
    """The 202 answer to an async extract, a batch or a crawl."""

    job_id: str
    status: ApiStatus | str
    status_url: str | None
    estimated_tokens: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> SubmittedJob:
        """Read the 202 answer; a status left out is ``queued``, as the contract says."""
        return cls(
            job_id=str(body["job_id"]),
            status=read_status(body.get("status", ApiStatus.QUEUED)),
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
        """Read the 200 answer of ``POST /v1/extract`` in sync mode."""
        return cls(**_content(body))


def _content(body: Mapping[str, Any]) -> dict[str, Any]:
    """What an extraction answers, synchronous or as a job: its data, metadata and charge."""
    return {
        "data": as_dict(body.get("data")),
        "metadata": as_dict(body.get("metadata")),
        "tokens_charged": body.get("tokens_charged"),
        "raw": dict(body),
    }


@dataclass(frozen=True)
class JobError:
    """Why a job failed, and whether trying again may help."""

    code: str
    message: str
    retryable: bool
    details: dict[str, Any]

    @classmethod
    def from_api(cls, body: Any) -> JobError | None:
        """Read a failed job's ``error`` object; None when there is none."""
        if not isinstance(body, Mapping):
            return None
        return cls(
            code=str(body.get("code", "")),
            message=str(body.get("message", "")),
            retryable=bool(body.get("retryable", False)),
            details=as_dict(body.get("details")),
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
        """The URL the job scraped, from its metadata."""
        return of_type(self.metadata.get("url"), str)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Job:
        """Read ``GET /v1/extract/{job_id}``; ``KeyError`` without a ``job_id``."""
        return cls(
            job_id=str(body["job_id"]),
            status=read_status(body.get("status", "")),
            created_at=parse_time(body.get("created_at")),
            completed_at=parse_time(body.get("completed_at")),
            error=JobError.from_api(body.get("error")),
            **_content(body),
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
