"""Resubmitting a retryable failed job: at most once per job, at most N times per chain.

Only a lease holder resubmits, and the job's row goes DONE (resubmitted) right after, so one
failed job is resubmitted once. A job that is part of a run, or that retries a batch's item,
hands that on to the new job first (``hand_on``), so the run or the batch follows the chain.
A holder may die between its POST and that write; whoever takes the lease next first looks
for a job for the same URL created after the failed one, and adopts it instead of posting
again.

The budget belongs to a chain of failed attempts: a job someone else submitted starts one
(depth 0), each job this module posts (or adopts) for a failed one is one deeper. A URL
scraped every day gets its retries every day, and a chain that keeps failing ends after N.
The depth is written only once the API has answered with the new job's id (or the look-up
found it), so a POST that failed in any way (429, 5xx, no answer) spends nothing: the next
attempt's look-up finds the job if the API made one after all, and posts again if not.

The look-up proves nothing while the job list may still be catching up: each POST is noted on
the row (``posted_at``) before it is sent, and no later attempt looks, let alone posts, until
the listing lag allowed for has passed since (``scrape_pipeline.listing_lag``); meanwhile the
message comes back through the queue. A POST that certainly did nothing (429, 402, 401, never
sent) takes its note off, so the next attempt posts at once.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from scrape_pipeline.attempt import Attempt
from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.events.outbox import retell_with_run
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    AuthError,
    PaymentRequiredError,
    RateLimitedError,
    TransportError,
)
from scrape_pipeline.geonode.models import Job
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger import Bookkeeping, LeaseLostError, Ledger, LedgerRow
from scrape_pipeline.listing_lag import ListingLag
from scrape_pipeline.runs.doubt import LedgerClaims, Posted, find_created

# A POST that failed so: the API did nothing (429, 402, 401) or may not have (a network error,
# said apart by ``request_sent``).
NOTHING_DONE = (RateLimitedError, PaymentRequiredError, AuthError, TransportError)


def did_nothing(exc: Exception) -> bool:
    """The POST that raised ``exc`` certainly created no job."""
    return isinstance(exc, NOTHING_DONE) and not (
        isinstance(exc, TransportError) and exc.request_sent
    )


@dataclass(frozen=True)
class Resubmission:
    """The job that carries on for the failed one; ``adopted`` when an earlier attempt posted it."""

    job_id: str
    adopted: bool


class Resubmitter:
    """Posts the original request again, within its chain's budget, never while an earlier
    POST's job may still be missing from the job list (``lag``)."""

    def __init__(
        self, client: GeonodeClient, ledger: Ledger, *, per_chain_limit: int, lag: ListingLag
    ) -> None:
        self._client = client
        self._ledger = ledger
        self._bookkeeping = Bookkeeping(ledger)
        self.per_chain_limit = per_chain_limit
        self.lag = lag

    def resubmit(self, job: Job, attempt: Attempt) -> Resubmission | None:
        """The new job for ``job``'s URL, or None when it has no URL or its chain's budget is
        spent. Any error of the POST goes up with nothing counted; ``ListingCatchingUpError``
        while an earlier attempt's POST may have made a job the list does not show yet.

        Not the first attempt: an earlier holder may have posted, so its job is looked for
        first (first attempts skip the look-up, which saves one API request per failure).
        """
        url = job.url
        if not url:
            return None
        depth = self._bookkeeping.chain_depth(JobKey(JobKind.EXTRACT, job.job_id))
        if attempt.row.attempts > 1:
            self.lag.check(attempt.row.posted_at)
            newer = self._newer_job_for(job, url)
            if newer is not None:
                # Recorded again in case the holder that posted it died before recording it.
                self._bookkeeping.record_chain(JobKey(JobKind.EXTRACT, newer), depth + 1)
                return Resubmission(newer, adopted=True)
        if depth >= self.per_chain_limit:
            return None
        submitted = self._post(job, url, attempt)
        self._bookkeeping.record_chain(JobKey(JobKind.EXTRACT, submitted), depth + 1)
        return Resubmission(submitted, adopted=False)

    def _post(self, job: Job, url: str, attempt: Attempt) -> str:
        """The POST, noted on the row before it is sent; the note taken off if it did nothing."""
        self._ledger.note_posting(attempt.key, attempt.owner, posting=True)
        posted = _posted(job)
        try:
            return self._client.submit_extract(
                url, formats=posted.formats, render_js=posted.render_js
            ).job_id
        except NOTHING_DONE as exc:
            if did_nothing(exc):
                with contextlib.suppress(AWSUnavailableError, LeaseLostError):
                    self._ledger.note_posting(attempt.key, attempt.owner, posting=False)
            raise

    def _newer_job_for(self, job: Job, url: str) -> str | None:
        """The earliest job of ``url`` since ``job`` posted as its resubmission is, that no run
        or other item holds: the one a holder that died after its POST made."""
        # A retry's resubmission carries on for the same item (``like``): not another's.
        claims = LedgerClaims(self._ledger, _posted(job), own={job.job_id}, like=job.job_id)
        since = job.created_at.timestamp() if job.created_at else 0.0
        found = find_created(self._client, url, since, claims=claims, skew_s=0.0)
        return found.job_id if found else None


def _posted(job: Job) -> Posted:
    """What the failed job was posted with, as its metadata says (markdown when it says
    none), so its resubmission asks for the same."""
    formats = job.metadata.get("formats")
    chosen = tuple(formats) if isinstance(formats, list) and formats else ("markdown",)
    return Posted(chosen, bool(job.metadata.get("render_js", False)))


def hand_on(ledger: Ledger, row: LedgerRow, owner: str, job_id: str) -> None:
    """Hand what ``row``'s job is followed for on to ``job_id``, which resubmits it, before the
    row closes: ``job_id`` noted on the row first (so whoever follows the chain, and a later
    holder's look-up, knows it for this job's), then the item it retries (linked) or the run
    it is part of (named on the new row, so its event names the run; retold if it settled
    already)."""
    if row.retry_of is None and row.run is None:
        return  # nobody follows this chain: the close alone names the new job
    ledger.note_resubmission(row.key, owner, job_id)
    new = JobKey(JobKind.EXTRACT, job_id)
    if row.retry_of is not None:
        ledger.link_retry(new, row.retry_of, run=row.run)
    elif row.run is not None:
        retell_with_run(ledger, ledger.carry_run(new, row.run))
