"""A batch's or crawl's items that failed retryably, each resubmitted as a linked extract job: the
job list finds one by URL, so one whose holder died after its POST is adopted, not posted again."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.batches import BatchItem, BatchStatus
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.fields import as_dict, parse_time
from scrape_pipeline.geonode.listing_lag import ListingLag
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger import chains
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import LeaseLostError
from scrape_pipeline.processor.attempt import Attempt
from scrape_pipeline.processor.manifest import ItemRecord, ItemStatus
from scrape_pipeline.processor.resubmission import NOTHING_DONE, did_nothing, posted_before
from scrape_pipeline.runs.doubt import LedgerClaims, Posted

# The item failure codes worth another try (those the API's extract jobs mark retryable).
DEFAULT_RETRYABLE_ITEM_CODES = ("UPSTREAM_TIMEOUT", "RATE_LIMITED")
# The detail of a linked extract job that was stored: its keys, for the item's manifest line.
DETAIL_KEYS = "keys"


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


def entry(index: int, job_id: str) -> str:
    """An item retried by ``job_id`` as the batch's row notes it."""
    return f"{index}:{job_id}"


def read_entry(text: str) -> tuple[int, str]:
    """``entry`` read back: the item's index and its retry's job id."""
    index, _, job_id = text.partition(":")
    return int(index), job_id


def retrying_by_index(entries: Iterable[str]) -> dict[int, str]:
    """The row's retrying items: index to the retry's job id."""
    return dict(read_entry(text) for text in entries)


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


class ItemRetrier:
    """Posts (or adopts) the extract job that retries one item, within its chain's budget."""

    def __init__(
        self, client: GeonodeClient, ledger: Ledger, *, per_chain_limit: int, lag: ListingLag
    ) -> None:
        self._client = client
        self._ledger = ledger
        self._chains = Bookkeeping(ledger)
        self.per_chain_limit = per_chain_limit
        self._lag = lag

    def retry(
        self,
        ref: RetryRef,
        item: BatchItem,
        *,
        status: BatchStatus,
        attempt: Attempt,
        noted: Mapping[int, str],
    ) -> str | None:
        """The retry's job id, posted or adopted, noted on the batch's row; None when the
        budget allows none. ``noted``: the row's retrying items so far."""
        url = item.url
        if not url or self.per_chain_limit < 1:
            return None
        job_id = noted.get(ref.index)
        if job_id is None and str(ref.index) in attempt.row.retry_posting:
            # An earlier holder began this POST and noted no answer: the API may have made it.
            self._lag.check(attempt.row.posted_at)
            # Not one retrying another item (a batch may hold a URL twice) nor a run's.
            claims = LedgerClaims(
                self._ledger, Posted(formats_of(status)), own=set(noted.values()), item=ref.text()
            )
            created = parse_time(status.raw.get("created_at"))
            job_id = posted_before(
                self._client, url, created.timestamp() if created else 0.0, claims
            )
        if job_id is None:
            job_id = self._post(ref, url, status, attempt.owner)
        self._ledger.note_item_retry(ref.parent, attempt.owner, ref.index, entry(ref.index, job_id))
        self.link(ref, job_id, depth=1, run=attempt.row.run)
        return job_id

    def _post(self, ref: RetryRef, url: str, status: BatchStatus, owner: str) -> str:
        self._ledger.note_item_retry(ref.parent, owner, ref.index, posting=True)
        try:
            # Posted as the look-up matches it: the batch's formats, not rendered.
            return self._client.submit_extract(url, formats=formats_of(status)).job_id
        except NOTHING_DONE as exc:
            if did_nothing(exc):
                # The API certainly did not act: the next attempt posts without a look-up.
                with contextlib.suppress(AWSUnavailableError, LeaseLostError):
                    self._ledger.note_item_retry(ref.parent, owner, ref.index)
            raise

    def link(self, ref: RetryRef, job_id: str, *, depth: int, run: str | None = None) -> None:
        """Record ``job_id``'s chain depth and link its row to the item (and the batch's run)."""
        key = JobKey(JobKind.EXTRACT, job_id)
        self._chains.record_chain(key, depth)
        self._ledger.link_retry(key, ref.text(), run=run)


@dataclass(frozen=True)
class Settled:
    """What the ledger says of a batch's retrying items: the final records of those settled."""

    records: tuple[ItemRecord, ...]
    entries: frozenset[str]  # their ``retrying_items`` entries, to take off the row

    def counts(self, row: LedgerRow) -> tuple[int, int, int]:
        """The row's item counts once these are counted: stored, dead-lettered, cancelled."""
        statuses = [record.status for record in self.records]
        return (
            row.items_stored + statuses.count(ItemStatus.STORED),
            row.items_failed + statuses.count(ItemStatus.DEAD_LETTERED),
            row.items_cancelled + statuses.count(ItemStatus.CANCELLED),
        )


def settled_items(ledger: Ledger, row: LedgerRow) -> Settled:
    """Each retrying item's chain followed in the ledger (no Geonode call) to the job that
    settled it, if any."""
    starts = {text: JobKey(JobKind.EXTRACT, read_entry(text)[1]) for text in row.retrying_items}
    records: list[ItemRecord] = []
    entries: set[str] = set()
    for text, chain in chains.follow(ledger, starts).items():
        if chain.final is not None:
            records.append(_final(read_entry(text)[0], chain.final))
            entries.add(text)
    return Settled(tuple(records), frozenset(entries))


def _final(index: int, job: LedgerRow) -> ItemRecord:
    """The item's final record from the extract job that settled its chain."""
    detail = job.detail
    tokens_text = detail.get(DETAIL_TOKENS, "")
    tokens = int(tokens_text) if tokens_text.isdigit() else None
    url = detail.get("url")
    if job.outcome is Outcome.STORED:
        keys = tuple(filter(None, detail.get(DETAIL_KEYS, "").split(",")))
        return ItemRecord(index, url, ItemStatus.STORED, keys, tokens, None, job.key.job_id)
    if job.outcome is Outcome.CANCELLED:
        return ItemRecord(index, url, ItemStatus.CANCELLED, (), tokens, None, job.key.job_id)
    record = detail.get("record")
    keys = (record,) if record else ()
    reason = detail.get("reason") or "retry failed"
    return ItemRecord(index, url, ItemStatus.DEAD_LETTERED, keys, tokens, reason, job.key.job_id)
