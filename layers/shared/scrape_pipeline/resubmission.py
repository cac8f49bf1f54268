"""Resubmitting a retryable failed job: at most once per job, at most N times per URL.

Only a lease holder resubmits, and the job's row goes DONE (resubmitted) right after, so one
failed job is resubmitted once. A holder may die between its POST and that write; whoever
takes the lease next first looks for a job for the same URL created after the failed one,
and adopts it instead of posting again.

A POST the API certainly did not act on (429, or a connection never made) gives its per-URL
slot back before the error goes up: a throttle must not spend the budget with nothing posted.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import RateLimitedError, TransportError
from scrape_pipeline.geonode.models import Job
from scrape_pipeline.ledger import Bookkeeping


@dataclass(frozen=True)
class Resubmission:
    """The job that carries on for the failed one; ``adopted`` when an earlier attempt posted it."""

    job_id: str
    adopted: bool


class Resubmitter:
    """Posts the original request again, within the per-URL budget."""

    def __init__(self, client: GeonodeClient, bookkeeping: Bookkeeping, *, per_url_limit: int):
        self._client = client
        self._bookkeeping = bookkeeping
        self.per_url_limit = per_url_limit

    def resubmit(self, job: Job, *, may_have_posted: bool) -> Resubmission | None:
        """The new job for ``job``'s URL, or None when it has no URL or its budget is spent.

        ``may_have_posted``: an earlier lease holder of this job may have posted already (this
        is not the first attempt), so look for its job before posting; first attempts skip the
        look-up, which saves one API request per failure.
        """
        url = job.url
        if not url:
            return None
        if may_have_posted:
            newer = self._newer_job_for(job, url)
            if newer is not None:
                return Resubmission(newer, adopted=True)
        if not self._bookkeeping.take_resubmission_slot(url, self.per_url_limit):
            return None
        formats = job.metadata.get("formats")
        try:
            submitted = self._client.submit_extract(
                url,
                formats=formats if isinstance(formats, list) and formats else ("markdown",),
                render_js=bool(job.metadata.get("render_js", False)),
            )
        except (RateLimitedError, TransportError) as exc:
            if isinstance(exc, RateLimitedError) or not exc.request_sent:
                self._bookkeeping.give_back_resubmission_slot(url)
            raise
        return Resubmission(submitted.job_id, adopted=False)

    def _newer_job_for(self, job: Job, url: str) -> str | None:
        since = job.created_at
        for row in self._client.iter_jobs(url=url, start_date=since):
            if row.job_id == job.job_id:
                continue
            if since is None or row.created_at is None or row.created_at >= since:
                return row.job_id
        return None
