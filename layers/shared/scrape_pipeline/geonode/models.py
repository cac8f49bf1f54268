"""Typed results of the Geonode API, read leniently (several shapes are unpublished); each keeps
the whole answer in ``raw``, so no field the contract does not name yet is lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from scrape_pipeline.geonode.fields import (
    REQUIRED,
    Answer,
    api,
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
class SubmittedJob(Answer):
    """The 202 answer to an async extract, a batch or a crawl (no status: ``queued``, as the
    contract says)."""

    job_id: str = api(str, default=REQUIRED)
    status: ApiStatus | str = api(read_status, default=ApiStatus.QUEUED)
    status_url: str | None = api()


@dataclass(frozen=True)
class JobError(Answer):
    """Why a job failed, and whether trying again may help."""

    code: str = api(str, default="")
    message: str = api(str, default="")
    retryable: bool = api(bool, default=False)


@dataclass(frozen=True)
class Job(Settles, Answer):
    """An extract job as ``GET /v1/extract/{job_id}`` returns it (``KeyError`` without a
    ``job_id``)."""

    job_id: str = api(str, default=REQUIRED)
    status: ApiStatus | str = api(read_status, default="")
    created_at: datetime | None = api(parse_time)
    completed_at: datetime | None = api(parse_time)
    data: dict[str, Any] = api(as_dict)
    metadata: dict[str, Any] = api(as_dict)
    error: JobError | None = api(lambda v: JobError.from_api(v) if isinstance(v, Mapping) else None)
    tokens_charged: int | None = api()

    @property
    def url(self) -> str | None:
        return of_type(self.metadata.get("url"), str)


@dataclass(frozen=True)
class JobSummary(Settles, Answer):
    """One row of ``GET /v1/extract/jobs`` (``KeyError`` without a ``job_id``)."""

    job_id: str = api(str, default=REQUIRED)
    status: ApiStatus | str = api(read_status, default="")
    url: str | None = api()
    created_at: datetime | None = api(parse_time)
    execution_time: Any = api()
    output: Any = api()


@dataclass(frozen=True)
class BatchItem(Settles, Answer):
    """One URL of a batch, or one page of a crawl."""

    input_index: int | None = api(lambda v: of_type(v, int))
    url: str | None = api()
    status: ApiStatus | str = api(read_status, default="")
    error_code: str | None = api()
    error_message: str | None = api()
    data: dict[str, Any] = api(as_dict)
    metadata: dict[str, Any] = api(as_dict)


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
        items = [BatchItem.from_api(i) for i in objects(body.get("items"))]
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
