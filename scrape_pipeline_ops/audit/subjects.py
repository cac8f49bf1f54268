"""The jobs of a window as the API reports them: the job list's extracts, and the items of
the batches and crawls named to it (no API lists those: the ledger and the runs journal do).

    extracts          GET /v1/extract/jobs?start_date&end_date, 100 rows a page, newest first
                      (a row pushed onto the next page by a new job is read once)
    batch, crawl      GET /v1/{kind}/{id}, 50 items a page; one created outside the window
                      costs its first page only; one unknown to the API (or answered without
                      its job_id) is judged as itself
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scrape_pipeline.geonode.client import JOBS_PAGE_MAX, GeonodeClient
from scrape_pipeline.geonode.errors import NotFoundError
from scrape_pipeline.geonode.fields import parse_time
from scrape_pipeline.geonode.models import TERMINAL_STATUSES, BatchStatus, JobSummary
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.paged_store import BATCH_PAGE_SIZE
from scrape_pipeline.processor.results import CONTENT_FILES
from scrape_pipeline_ops.audit.objects import Where
from scrape_pipeline_ops.audit.verdicts import Subject


@dataclass
class Calls:
    """What the API was asked: job-list pages, batch and crawl pages, single jobs."""

    list_pages: int = 0
    container_pages: int = 0
    job_gets: int = 0


def _epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _files(output: Any) -> tuple[str, ...]:
    """The content files a job's ``output`` (its formats, comma-separated) calls for."""
    if not isinstance(output, str):
        return ()
    names = (name.strip() for name in output.split(","))
    return tuple(CONTENT_FILES[name][0] for name in names if name in CONTENT_FILES)


def extract_subject(row: JobSummary) -> Subject:
    """One job-list row as a subject; settled at ``created_at + execution_time`` if given."""
    created = _epoch(row.created_at)
    took = row.execution_time
    settled = None
    if row.is_terminal and created is not None and isinstance(took, int | float):
        settled = created + float(took)
    return Subject(
        JobKind.EXTRACT,
        row.job_id,
        row.status,
        url=row.url,
        created_at=created,
        settled_at=settled,
        files=_files(row.output),
    )


def window_extracts(
    client: GeonodeClient, since: float, until: float, calls: Calls
) -> list[Subject]:
    """Every extract job created in ``[since, until]``, each once."""
    seen: dict[str, Subject] = {}
    page = 1
    while True:
        answer = client.list_jobs(
            start_date=since, end_date=until, page=page, page_size=JOBS_PAGE_MAX
        )
        calls.list_pages += 1
        for row in answer.items:
            seen.setdefault(row.job_id, extract_subject(row))
        if answer.is_last or not answer.items:
            return list(seen.values())
        page += 1


def one_extract(client: GeonodeClient, job_id: str, calls: Calls) -> Subject:
    """A job the window's list did not show (a run's), by ``GET /v1/extract/{id}``."""
    calls.job_gets += 1
    try:
        job = client.get_job(job_id)
    except NotFoundError:
        return Subject(JobKind.EXTRACT, job_id, None)
    created = _epoch(job.created_at)
    formats = job.metadata.get("formats")
    files = _files(",".join(formats)) if isinstance(formats, list) else ()
    return Subject(
        JobKind.EXTRACT,
        job_id,
        job.status,
        url=job.url,
        created_at=created,
        settled_at=_epoch(job.completed_at),
        files=files,
    )


def container_items(
    client: GeonodeClient,
    kind: JobKind,
    job_id: str,
    window: tuple[float, float],
    calls: Calls,
) -> list[Subject]:
    """The items of one batch or crawl created in ``window`` (none if created outside it).

    Each item's index is its ``input_index``, else its place in the listing: the processor's
    (``paged_store``) numbering, pages of the same size.
    """
    try:
        first = _page(client, kind, job_id, 1, calls)
    except (NotFoundError, ValueError):  # unknown, or an answer without its job_id (poison)
        return [Subject(kind, job_id, None)]
    created = _epoch(parse_time(first.raw.get("created_at")))
    if created is not None and not window[0] <= created <= window[1]:
        return []
    settled = _epoch(parse_time(first.raw.get("completed_at")))
    subjects = []
    for page_number, status in _pages(client, kind, job_id, first, calls):
        for position, item in enumerate(status.page.items):
            index = item.input_index
            if index is None:
                index = (page_number - 1) * BATCH_PAGE_SIZE + position
            subjects.append(
                Subject(
                    kind,
                    job_id,
                    item.status,
                    item=index,
                    url=item.url,
                    created_at=created,
                    settled_at=settled if item.status in TERMINAL_STATUSES else None,
                )
            )
    return subjects


def _page(
    client: GeonodeClient, kind: JobKind, job_id: str, number: int, calls: Calls
) -> BatchStatus:
    calls.container_pages += 1
    if kind is JobKind.BATCH:
        return client.get_batch(job_id, page=number, page_size=BATCH_PAGE_SIZE)
    return client.get_crawl(job_id, page=number, page_size=BATCH_PAGE_SIZE)


def _pages(
    client: GeonodeClient, kind: JobKind, job_id: str, first: BatchStatus, calls: Calls
) -> Iterator[tuple[int, BatchStatus]]:
    number, status = 1, first
    while True:
        yield number, status
        if status.page.is_last or not status.page.items:
            return
        number += 1
        status = _page(client, kind, job_id, number, calls)


def replaced_failures(subjects: Iterable[Subject]) -> set[Where]:
    """Subjects with a later extract job of the same URL among ``subjects``: an extract job
    resubmitted, or a batch item or crawl page retried as an extract job (an item's time is
    its batch's or crawl's ``created_at``; its retry is posted once the batch settled)."""
    latest: dict[str, float] = {}
    listed = [s for s in subjects if s.url and s.created_at is not None]
    for s in listed:
        if s.kind is JobKind.EXTRACT and s.url and s.created_at is not None:
            latest[s.url] = max(latest.get(s.url, s.created_at), s.created_at)
    return {
        s.where
        for s in listed
        if s.url and s.created_at is not None and latest.get(s.url, s.created_at) > s.created_at
    }
