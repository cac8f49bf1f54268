"""Resubmitting a retryable failed job, or a batch's or crawl's retryably failed item, within its
chain's budget; a holder that died after its POST is followed by one that adopts its job."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.events.outbox import retell_with_run
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    AuthError,
    PaymentRequiredError,
    RateLimitedError,
    TransportError,
)
from scrape_pipeline.geonode.fields import as_dict, parse_time
from scrape_pipeline.geonode.listing_lag import ListingLag
from scrape_pipeline.geonode.models import BatchItem, BatchStatus, Job
from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.leases import LeaseLostError
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.deadline import Attempt
from scrape_pipeline.processor.manifest import entry
from scrape_pipeline.runs.doubt import LedgerClaims, Posted, find_created

# A POST that failed so did nothing (429, 402, 401), or may not have (``request_sent``).
NOTHING_DONE = (RateLimitedError, PaymentRequiredError, AuthError, TransportError)


@dataclass(frozen=True)
class RetryRef:
    """The item an extract job retries: its batch or crawl, and its index there."""

    parent: JobKey
    index: int

    def text(self) -> str:
        """As a row keeps it: ``<kind>#<job id>#<index>``."""
        return f"{self.parent.pk}#{self.index}"

    @classmethod
    def read(cls, text: str | None) -> RetryRef | None:
        """The ref ``text`` holds; None for none, or for one that is not ours."""
        if not text:
            return None
        pk, _, index = text.rpartition("#")
        try:
            return cls(JobKey.from_pk(pk), int(index))
        except ValueError:
            return None


def is_retryable(item: BatchItem, codes: Sequence[str]) -> bool:
    """Another try may help: the item's own ``retryable`` flag, else its code in ``codes``."""
    for flag in (item.raw.get("retryable"), as_dict(item.raw.get("error")).get("retryable")):
        if isinstance(flag, bool):
            return flag
    return item.error_code in codes  # None, no code, is in none


def formats_of(status: BatchStatus) -> tuple[str, ...]:
    """The formats the batch asked for, else those its items returned, else markdown."""
    asked = status.raw.get("formats")
    if isinstance(asked, list) and asked and all(isinstance(f, str) for f in asked):
        return tuple(asked)
    seen: dict[str, None] = {}
    for item in status.page.items:
        for name in ("markdown", "html"):
            if item.data.get(name) is not None:
                seen[name] = None
    return tuple(seen) or ("markdown",)


class Resubmitter:
    """Posts a job's or an item's request again, never while an earlier POST's job may still be
    missing from the job list (``lag``)."""

    def __init__(
        self, client: GeonodeClient, ledger: WorkLedger, *, per_chain_limit: int, lag: ListingLag
    ) -> None:
        self._client = client
        self._ledger = ledger
        self._bookkeeping = Bookkeeping(ledger)
        self.per_chain_limit = per_chain_limit
        self.lag = lag

    def resubmit(self, job: Job, attempt: Attempt) -> dict[str, str] | None:
        """The detail naming the new job for ``job``'s URL (looked up first after a first
        attempt, which may have posted: ``adopted``), or None without a URL or budget; errors go
        up with nothing counted."""
        url = job.url
        if not url:
            return None
        depth = self._bookkeeping.chain_depth(JobKey(JobKind.EXTRACT, job.job_id))
        if attempt.row.attempts > 1:
            # A retry's resubmission carries on for the same item (``like``): not another's.
            claims = LedgerClaims(self._ledger, _posted(job), own={job.job_id}, like=job.job_id)
            newer = self._adopt(url, job.created_at, claims, attempt)
            if newer is not None:
                # Recorded again in case the holder that posted it died before recording it.
                self._bookkeeping.record_chain(JobKey(JobKind.EXTRACT, newer), depth + 1)
                return {DETAIL_RESUBMITTED_AS: newer, "adopted": "true"}
        if depth >= self.per_chain_limit:
            return None
        posted = _posted(job)
        submitted = _post_noted(
            lambda posting: self._ledger.note_posting(attempt.key, attempt.owner, posting=posting),
            lambda: (
                self._client.submit_extract(
                    url, formats=posted.formats, render_js=posted.render_js
                ).job_id
            ),
        )
        self._bookkeeping.record_chain(JobKey(JobKind.EXTRACT, submitted), depth + 1)
        return {DETAIL_RESUBMITTED_AS: submitted, "adopted": "false"}

    def retry_item(
        self,
        ref: RetryRef,
        item: BatchItem,
        *,
        status: BatchStatus,
        attempt: Attempt,
        noted: Mapping[int, str],
    ) -> str | None:
        """The job retrying item ``ref``, posted or adopted, noted on the batch's row; None
        when the budget allows none. ``noted``: the row's retrying items so far."""
        url = item.url
        if not url or self.per_chain_limit < 1:
            return None
        job_id = noted.get(ref.index)
        if job_id is None and str(ref.index) in attempt.row.retry_posting:
            # An earlier holder began this POST and noted no answer: the API may have made it.
            # Not one retrying another item (a batch may hold a URL twice) nor a run's.
            claims = LedgerClaims(
                self._ledger, Posted(formats_of(status)), own=set(noted.values()), item=ref.text()
            )
            created = parse_time(status.raw.get("created_at"))
            job_id = self._adopt(url, created, claims, attempt)
        if job_id is None:
            parent, owner = ref.parent, attempt.owner
            job_id = _post_noted(
                lambda posting: self._ledger.note_item_retry(
                    parent, owner, ref.index, posting=posting
                ),
                # Posted as the look-up matches it: the batch's formats, not rendered.
                lambda: self._client.submit_extract(url, formats=formats_of(status)).job_id,
            )
        self._ledger.note_item_retry(ref.parent, attempt.owner, ref.index, entry(ref.index, job_id))
        key = JobKey(JobKind.EXTRACT, job_id)
        self._bookkeeping.record_chain(key, 1)
        self._ledger.link_retry(key, ref.text(), run=attempt.row.run)
        return job_id

    def _adopt(
        self, url: str, since: datetime | None, claims: LedgerClaims, attempt: Attempt
    ) -> str | None:
        """The earliest job of ``url`` since ``since`` posted as ``claims`` say and held by no
        run or other item (one a holder that died after its POST made), once the list shows it."""
        self.lag.check(attempt.row.posted_at)
        start = since.timestamp() if since else 0.0
        found = find_created(self._client, url, start, claims=claims, skew_s=0.0)
        return found.job_id if found else None


def _post_noted(note: Callable[[bool], object], post: Callable[[], str]) -> str:
    """The POST, noted on the row first; the note taken off if the POST certainly did nothing
    (the next attempt then posts without a look-up)."""
    note(True)
    try:
        return post()
    except NOTHING_DONE as exc:
        if not (isinstance(exc, TransportError) and exc.request_sent):
            with contextlib.suppress(AWSUnavailableError, LeaseLostError):
                note(False)
        raise


def _posted(job: Job) -> Posted:
    """What the failed job was posted with (markdown when it says none)."""
    formats = job.metadata.get("formats")
    chosen = tuple(formats) if isinstance(formats, list) and formats else ("markdown",)
    return Posted(chosen, bool(job.metadata.get("render_js", False)))


def hand_on(ledger: WorkLedger, row: LedgerRow, owner: str, job_id: str) -> None:
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
