"""Resolving an extract entry in doubt: did the lost POST create a job? Ask the job list.

The API lists extract jobs by ``url`` (newest first); a job the lost POST created was made
after the POST was sent, on the API's clock, which may run a little behind ours: the lookup
starts ``skew_s`` before the POST. The earliest such job not already another entry's is the
one adopted. No API lists batches or crawls, so they are never resolved here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any, Protocol

from scrape_pipeline.geonode.models import JobSummary

DEFAULT_SKEW_S = 300.0


class JobLister(Protocol):
    """The one read of the API the lookup needs (``GeonodeClient.iter_jobs``)."""

    def iter_jobs(self, **filters: Any) -> Iterator[JobSummary]:
        """Every job matching ``filters``, each once."""
        ...


def find_created(
    client: JobLister,
    url: str,
    posted_at: float,
    *,
    skew_s: float = DEFAULT_SKEW_S,
    taken: Collection[str] = (),
) -> JobSummary | None:
    """The job a POST of ``url`` sent at ``posted_at`` created, if the API lists one."""
    since = posted_at - skew_s
    found = [
        job
        for job in client.iter_jobs(url=url, start_date=since)
        if job.url in (url, None)
        and job.job_id not in taken
        and (job.created_at is None or job.created_at.timestamp() >= since)
    ]
    if not found:
        return None
    return min(found, key=lambda job: job.created_at.timestamp() if job.created_at else since)


__all__: Sequence[str] = ("DEFAULT_SKEW_S", "JobLister", "find_created")
