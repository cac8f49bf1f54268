"""A batch's or crawl's retryably failed items: which are retried, how the row notes them, and
their final records once the extract jobs retrying them settle (the ledger says, no API call)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scrape_pipeline.geonode.batches import BatchItem, BatchStatus
from scrape_pipeline.geonode.fields import as_dict
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger import chains
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.manifest import ItemRecord, ItemStatus, counted

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


@dataclass(frozen=True)
class Settled:
    """What the ledger says of a batch's retrying items: the final records of those settled."""

    records: tuple[ItemRecord, ...]
    entries: frozenset[str]  # their ``retrying_items`` entries, to take off the row

    def counts(self, row: LedgerRow) -> tuple[int, int, int]:
        """The row's item counts once these are counted: stored, dead-lettered, cancelled."""
        more = counted(self.records)
        return (
            row.items_stored + more[0],
            row.items_failed + more[1],
            row.items_cancelled + more[2],
        )


def settled_items(ledger: WorkLedger, row: LedgerRow) -> Settled:
    """Each retrying item's chain followed in the ledger to the job that settled it, if any."""
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
    url, retry_job = detail.get("url"), job.key.job_id
    if job.outcome is Outcome.STORED:
        keys = tuple(filter(None, detail.get(DETAIL_KEYS, "").split(",")))
        return ItemRecord(index, url, ItemStatus.STORED, keys, tokens, None, retry_job)
    if job.outcome is Outcome.CANCELLED:
        return ItemRecord(index, url, ItemStatus.CANCELLED, (), tokens, None, retry_job)
    record = detail.get("record")
    keys = (record,) if record else ()
    reason = detail.get("reason") or "retry failed"
    return ItemRecord(index, url, ItemStatus.DEAD_LETTERED, keys, tokens, reason, retry_job)
