"""A batch's or crawl's manifest (docs/architecture.md): a part per stored range of items before
each checkpoint, then the manifest, once, before DONE: it means every item settled."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from operator import attrgetter
from typing import Any

from scrape_pipeline.geonode.fields import int_or_none, of_type
from scrape_pipeline.geonode.models import BatchItem, BatchStatus
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger import chains
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.work import WorkLedger
from scrape_pipeline.processor.results import ResultStore, result_prefix

PARTS_PREFIX = "manifest-parts"
MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
# The reason of a failed item the API gave no error code for.
REASON_ITEM_FAILED = "item failed"
_OPTIONAL = frozenset({"reason", "retry_job"})
# The detail of a linked extract job that was stored: its keys, for the item's manifest line.
DETAIL_KEYS = "keys"


class ItemStatus(StrEnum):
    """How a batch's or crawl's item ended (no "pending": such a page gets no part yet)."""

    STORED = "stored"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"
    # Only in parts: resubmitted as an extract job; the manifest gives the retry's outcome.
    RETRYING = "retrying"


@dataclass(frozen=True)
class ItemRecord:
    """One item's line in the manifest: where it is, how it ended, what it cost."""

    index: int
    url: str | None
    status: ItemStatus
    keys: tuple[str, ...] = ()
    tokens: int | None = None
    reason: str | None = None
    # The extract job that retried the item (the last of its chain, once settled).
    retry_job: str | None = None

    @classmethod
    def of(
        cls,
        item: BatchItem,
        index: int,
        status: ItemStatus,
        keys: Sequence[str] = (),
        *,
        retry_job: str | None = None,
    ) -> ItemRecord:
        """The record of ``item`` (the API's answer for it) stored or parked at ``keys``."""
        failed = status in (ItemStatus.DEAD_LETTERED, ItemStatus.RETRYING)
        reason = (item.error_code or REASON_ITEM_FAILED) if failed else None
        # What the item cost, as the API said (in its metadata, or beside it).
        tokens = int_or_none(item.metadata.get("tokens_charged"))
        if tokens is None:
            tokens = int_or_none(item.raw.get("tokens_charged"))
        return cls(index, item.url, status, tuple(keys), tokens, reason, retry_job)

    def to_json(self) -> dict[str, Any]:
        """The record as the manifest and its parts keep it."""
        body = {**asdict(self), "status": self.status.value, "keys": list(self.keys)}
        # ``reason`` and ``retry_job`` only when set.
        return {k: v for k, v in body.items() if v is not None or k not in _OPTIONAL}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ItemRecord:
        """Read a record back from a part; ``ValueError`` for an unknown status."""
        return cls(
            index=int(body["index"]),
            url=body.get("url"),
            status=ItemStatus(body["status"]),
            keys=tuple(str(k) for k in body.get("keys") or ()),
            tokens=of_type(body.get("tokens"), int),
            reason=body.get("reason"),
            retry_job=body.get("retry_job"),
        )


def entry(index: int, job_id: str) -> str:
    """An item retried by ``job_id`` as the batch's row notes it (``retrying_items``)."""
    return f"{index}:{job_id}"


def read_entry(text: str) -> tuple[int, str]:
    """``entry`` read back: the item's index and its retry's job id."""
    index, _, job_id = text.partition(":")
    return int(index), job_id


def retrying_by_index(entries: Iterable[str]) -> dict[int, str]:
    """The row's retrying items: index to the retry's job id."""
    return dict(read_entry(text) for text in entries)


def settled_items(ledger: WorkLedger, entries: Iterable[str]) -> dict[str, ItemRecord]:
    """Each retrying item (``<index>:<job id>``) whose chain the ledger shows settled: its
    final record."""
    starts = {text: JobKey(JobKind.EXTRACT, read_entry(text)[1]) for text in entries}
    return {
        text: _final(read_entry(text)[0], chain.final)
        for text, chain in chains.follow(ledger, starts).items()
        if chain.final is not None
    }


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


def manifest_key(kind: JobKind, job_id: str) -> str:
    """Where a batch's or crawl's manifest lives, beside its items."""
    return f"{result_prefix(kind, job_id)}/{MANIFEST_FILE}"


def part_key(kind: JobKind, job_id: str, page: int, first: int) -> str:
    """The part of page ``page`` that starts at its item ``first``."""
    return _kept(JobKey(kind, job_id), f"{page:05d}-{first:03d}.json")


def _kept(key: JobKey, name: str) -> str:
    """Where the parts, the last page's answer (``status.json``) and retried items' final records
    (``retries/``) wait for the manifest: bookkeeping, outside the job's results."""
    return f"{PARTS_PREFIX}/{key.kind.value}/{key.job_id}/{name}"


type Counts = tuple[int, int, int]  # items stored, dead-lettered, cancelled


def counted(records: Iterable[ItemRecord], base: Counts = (0, 0, 0)) -> Counts:
    """``base`` plus how many of ``records`` were stored, dead-lettered, cancelled."""
    statuses = [record.status for record in records]
    stored, failed, cancelled = base
    return (
        stored + statuses.count(ItemStatus.STORED),
        failed + statuses.count(ItemStatus.DEAD_LETTERED),
        cancelled + statuses.count(ItemStatus.CANCELLED),
    )


def build_manifest(
    key: JobKey, status: BatchStatus, records: Iterable[ItemRecord]
) -> dict[str, Any]:
    """The manifest of a settled batch or crawl: its items once each, counts, tokens, and its
    status and times as its last page answered."""
    by_index: dict[int, ItemRecord] = {}
    for record in records:
        by_index.setdefault(record.index, record)
    items = sorted(by_index.values(), key=attrgetter("index"))
    counts = dict(zip(("stored", "dead_lettered", "cancelled"), counted(items), strict=True))
    return {
        "manifest_version": MANIFEST_VERSION,
        "kind": key.kind.value,
        "job_id": key.job_id,
        "status": str(status.status),
        "created_at": status.raw.get("created_at"),
        "settled_at": status.raw.get("completed_at"),
        "counts": {**counts, "total": len(items)},
        "tokens_total": sum(r.tokens for r in items if r.tokens is not None),
        "api_tokens_charged_total": status.tokens_charged,
        "api_counters": dict(status.counters),
        "items": [record.to_json() for record in items],
    }


@dataclass(frozen=True)
class Part:
    """The records of one page's items ``first`` to ``end`` (excluded); ``page_end``: the page
    ends there, ``last``: the job does."""

    page: int
    first: int
    end: int
    records: tuple[ItemRecord, ...]
    page_end: bool
    last: bool

    def to_json(self) -> dict[str, Any]:
        """The part as S3 keeps it (its records as ``items``)."""
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "records"}
        return {**body, "items": [r.to_json() for r in self.records]}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Part:
        """Read a part back; ``ValueError`` for one that does not move on from ``first``."""
        part = cls(
            page=int(body["page"]),
            first=int(body["first"]),
            end=int(body["end"]),
            records=tuple(ItemRecord.from_json(i) for i in body.get("items") or ()),
            page_end=bool(body["page_end"]),
            last=bool(body["last"]),
        )
        if part.end <= part.first and not part.page_end:
            raise ValueError(f"part {part.page}-{part.first} ends at {part.end}")
        return part


@dataclass(frozen=True)
class Covered:
    """What the parts from a position now cover: up to ``end`` of the page, these records."""

    end: int
    records: tuple[ItemRecord, ...]


class ManifestWriter:
    """Writes the parts as pages are stored, the manifest last; the parts chain with no gap or
    overlap, read back by key alone (each ``end`` is where the next part starts)."""

    def __init__(self, results: ResultStore) -> None:
        self._results = results

    def record_range(
        self,
        key: JobKey,
        page: int,
        first: int,
        records: Sequence[ItemRecord],
        *,
        page_items: int,
        last: bool,
    ) -> Covered:
        """Keep the records of ``page``'s items from ``first`` before the checkpoint passes them;
        a dead attempt's part there stands and the range goes on from its end."""
        end = first + len(records)
        covered: list[ItemRecord] = []
        at = first
        while True:
            part = Part(page, at, end, tuple(records[at - first :]), end == page_items, last)
            where = part_key(key.kind, key.job_id, page, at)
            if self._results.put_json_once(where, part.to_json()):
                return Covered(end, (*covered, *part.records))
            existing = Part.from_json(self._results.read_json(where))
            covered.extend(existing.records)
            if existing.end >= end or existing.page_end:
                return Covered(existing.end, tuple(covered))
            at = existing.end

    def keep_status(self, key: JobKey, status: BatchStatus) -> None:
        """Keep the last page's answer for a manifest written once the retries settle."""
        body = {k: v for k, v in status.raw.items() if k != "items"}
        self._results.put_json_once(_kept(key, "status.json"), body)

    def kept_status(self, key: JobKey) -> BatchStatus:
        """The last page's answer ``keep_status`` kept."""
        return BatchStatus.from_api(self._results.read_json(_kept(key, "status.json")))

    def settle_retry(self, key: JobKey, record: ItemRecord) -> None:
        """Keep a retried item's final record (the first one written stands)."""
        self._results.put_json_once(_retry(key, record.index), record.to_json())

    def write(self, key: JobKey, status: BatchStatus) -> str:
        """Put the manifest once from the chain of parts (a retried item's final record in its
        place); its key. One GetObject a part and a retry."""
        records: list[ItemRecord] = []
        page, first = 1, 0
        while True:
            part = Part.from_json(
                self._results.read_json(part_key(key.kind, key.job_id, page, first))
            )
            records.extend(part.records)
            if not part.page_end:
                first = part.end
            elif part.last:
                break
            else:
                page, first = page + 1, 0
        records = [self._final(key, record) for record in records]
        where = manifest_key(key.kind, key.job_id)
        self._results.put_json_once(where, build_manifest(key, status, records))
        return where

    def _final(self, key: JobKey, record: ItemRecord) -> ItemRecord:
        if record.status is not ItemStatus.RETRYING:
            return record
        final = ItemRecord.from_json(self._results.read_json(_retry(key, record.index)))
        return final if final.url is not None else replace(final, url=record.url)


def _retry(key: JobKey, index: int) -> str:
    return _kept(key, f"retries/{index:05d}.json")
