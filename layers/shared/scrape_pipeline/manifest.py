"""A batch's or crawl's manifest: every item's index, URL, status, keys and tokens, written last.

    manifest-parts/<kind>/<job id>/<page>-<first item>-<end item>.json   a stored range's items
    results/<kind>/<job id>/manifest.json                                 the job's, once, last

Each range of a page's items that a checkpoint moves past gets its part, written before that
checkpoint, from what the page's GET answered (no other API call). A range redone after a
crash between its part and its checkpoint gets a second part that repeats the first's items:
the manifest takes each item once, by index. Once the last page is stored the parts are read
back (one ListObjectsV2 per 1,000 parts, one GetObject each) and the manifest is put with
``If-None-Match: *`` before the ledger's DONE, so "the manifest exists" means every item is
stored or dead-lettered, and a retry after a crash keeps the first manifest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scrape_pipeline.geonode.models import BatchItem, BatchStatus
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.results import ResultStore, result_prefix

PARTS_PREFIX = "manifest-parts"
MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
# The reason of a failed item the API gave no error code for.
REASON_ITEM_FAILED = "item failed"


class ItemStatus(StrEnum):
    """How a batch's or crawl's item ended, as its manifest says."""

    # No "pending": a page with an item still running gets no part until it drains.
    STORED = "stored"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"


def item_tokens(item: BatchItem) -> int | None:
    """What the item cost, as the API said (in its metadata, or beside it)."""
    for value in (item.metadata.get("tokens_charged"), item.raw.get("tokens_charged")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


@dataclass(frozen=True)
class ItemRecord:
    """One item's line in the manifest: where it is, how it ended, what it cost."""

    index: int
    url: str | None
    status: ItemStatus
    keys: tuple[str, ...] = ()
    tokens: int | None = None
    reason: str | None = None

    @classmethod
    def of(
        cls, item: BatchItem, index: int, status: ItemStatus, keys: Sequence[str] = ()
    ) -> ItemRecord:
        """The record of ``item`` (the API's answer for it) stored or parked at ``keys``."""
        failed = status is ItemStatus.DEAD_LETTERED
        reason = (item.error_code or REASON_ITEM_FAILED) if failed else None
        return cls(index, item.url, status, tuple(keys), item_tokens(item), reason)

    def to_json(self) -> dict[str, Any]:
        """The record as the manifest and its parts keep it."""
        body: dict[str, Any] = {
            "index": self.index,
            "url": self.url,
            "status": self.status.value,
            "keys": list(self.keys),
            "tokens": self.tokens,
        }
        if self.reason is not None:
            body["reason"] = self.reason
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ItemRecord:
        """Read a record back from a part; ``ValueError`` for an unknown status."""
        tokens = body.get("tokens")
        return cls(
            index=int(body["index"]),
            url=body.get("url"),
            status=ItemStatus(body["status"]),
            keys=tuple(str(k) for k in body.get("keys") or ()),
            tokens=tokens if isinstance(tokens, int) else None,
            reason=body.get("reason"),
        )


def manifest_key(kind: JobKind, job_id: str) -> str:
    """Where a batch's or crawl's manifest lives, beside its items."""
    return f"{result_prefix(kind, job_id)}/{MANIFEST_FILE}"


def parts_prefix(kind: JobKind, job_id: str) -> str:
    """Where a batch's or crawl's parts live (outside its results: they are bookkeeping)."""
    return f"{PARTS_PREFIX}/{kind.value}/{job_id}/"


def part_key(kind: JobKind, job_id: str, page: int, first: int, end: int) -> str:
    """The part of items ``first`` (included) to ``end`` (excluded) of page ``page``."""
    return f"{parts_prefix(kind, job_id)}{page:05d}-{first:03d}-{end:03d}.json"


def build_manifest(
    key: JobKey, status: BatchStatus, records: Iterable[ItemRecord]
) -> dict[str, Any]:
    """The manifest of a settled batch or crawl: its items once each by index, counts by
    status, tokens, and the job's own status and times as its last page answered."""
    by_index: dict[int, ItemRecord] = {}
    for record in records:
        by_index.setdefault(record.index, record)
    items = [by_index[i] for i in sorted(by_index)]
    counts = {status_.value: 0 for status_ in ItemStatus}
    for record in items:
        counts[record.status.value] += 1
    summary = status.raw.get("token_summary")
    charged = summary.get("tokens_charged_total") if isinstance(summary, Mapping) else None
    return {
        "manifest_version": MANIFEST_VERSION,
        "kind": key.kind.value,
        "job_id": key.job_id,
        "status": str(status.status),
        "created_at": status.raw.get("created_at"),
        "settled_at": status.raw.get("completed_at"),
        "counts": {**counts, "total": len(items)},
        "tokens_total": sum(r.tokens for r in items if r.tokens is not None),
        "api_tokens_charged_total": charged if isinstance(charged, int) else None,
        "api_counters": dict(status.counters),
        "items": [record.to_json() for record in items],
    }


class ManifestWriter:
    """Writes a batch's or crawl's parts as its pages are stored, and its manifest last."""

    def __init__(self, results: ResultStore) -> None:
        self._results = results

    def record_part(
        self, key: JobKey, page: int, first: int, end: int, records: Sequence[ItemRecord]
    ) -> None:
        """Keep the records of items ``first`` to ``end`` of ``page`` (before the checkpoint
        that moves past them); a range with no settled item needs none."""
        if not records:
            return
        body = {"page": page, "first": first, "end": end, "items": [r.to_json() for r in records]}
        self._results.put_json_once(part_key(key.kind, key.job_id, page, first, end), body)

    def write(self, key: JobKey, status: BatchStatus) -> str:
        """Put the manifest, once, from every part; its key (a repeat keeps the first)."""
        records = [
            ItemRecord.from_json(item)
            for part in self._results.keys_under(parts_prefix(key.kind, key.job_id))
            for item in self._results.read_json(part)["items"]
        ]
        where = manifest_key(key.kind, key.job_id)
        self._results.put_json_once(where, build_manifest(key, status, records))
        return where
