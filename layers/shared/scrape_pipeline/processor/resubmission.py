"""Resubmitting a retryable failed job: at most once per job, N times per chain; a holder that
died after its POST is followed by one that adopts its job (once the listing lag has passed)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.events.outbox import retell_with_run
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    AuthError,
    PaymentRequiredError,
    RateLimitedError,
    TransportError,
)
from scrape_pipeline.geonode.listing_lag import ListingLag
from scrape_pipeline.geonode.models import Job
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import LeaseLostError
from scrape_pipeline.processor.attempt import Attempt
from scrape_pipeline.runs.doubt import LedgerClaims, Posted, find_created

# A POST that failed so did nothing (429, 402, 401), or may not have (``request_sent``).
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
        """The new job for ``job``'s URL (looked up first after a first attempt, which may
        have posted), or None without a URL or budget; errors go up with nothing counted."""
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
        # A retry's resubmission carries on for the same item (``like``): not another's.
        since = job.created_at.timestamp() if job.created_at else 0.0
        claims = LedgerClaims(self._ledger, _posted(job), own={job.job_id}, like=job.job_id)
        return posted_before(self._client, url, since, claims)


def posted_before(
    client: GeonodeClient, url: str, since: float, claims: LedgerClaims
) -> str | None:
    """The earliest job of ``url`` since ``since`` posted as ``claims`` say and held by no run
    or other item: one a holder that died after its POST made and did not note."""
    found = find_created(client, url, since, claims=claims, skew_s=0.0)
    return found.job_id if found else None


def _posted(job: Job) -> Posted:
    """What the failed job was posted with (markdown when it says none)."""
    formats = job.metadata.get("formats")
    chosen = tuple(formats) if isinstance(formats, list) and formats else ("markdown",)
    return Posted(chosen, bool(job.metadata.get("render_js", False)))


def hand_on(ledger: Ledger, row: LedgerRow, owner: str, job_id: str) -> None:
    """Before ``row`` closes, hand its item (linked) or run (named on the new row, retold if
    it settled) on to ``job_id``, noted on the row first so a later look-up knows it."""
    if row.retry_of is None and row.run is None:
        return  # nobody follows this chain: the close alone names the new job
    ledger.note_resubmission(row.key, owner, job_id)
    new = JobKey(JobKind.EXTRACT, job_id)
    if row.retry_of is not None:
        ledger.link_retry(new, row.retry_of, run=row.run)
    elif row.run is not None:
        retell_with_run(ledger, ledger.carry_run(new, row.run))
