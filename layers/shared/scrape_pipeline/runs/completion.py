"""When a run is complete (nothing open, every chain ended with its event on the bus), and what
it says then: its manifest (every URL's final job, outcome and keys) and ``Run Completed``."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

from scrape_pipeline.events.detail import DetailType, OutcomeEvent
from scrape_pipeline.jobs import DETAIL_TOKENS, JobKey, JobKind, Outcome
from scrape_pipeline.ledger.chains import Chain
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.owing import BatchItems
from scrape_pipeline.runs.plan import Run, RunMode

S = EntryState
# What keeps a run from being complete, beside an unsettled job.
OPEN: Final = (S.PLANNED, S.POSTING, S.IN_DOUBT)
RUNS_PREFIX: Final = "runs"
MANIFEST_VERSION: Final = 1
REJECTED: Final = "rejected"
NO_ITEM: Final = "no_item"  # a batch URL the API kept no item for (it dropped it as invalid)


def run_manifest_key(run: str) -> str:
    """Where a run's manifest lives."""
    return f"{RUNS_PREFIX}/{run}/manifest.json"


def submitted_key(run: Run, entry: Entry) -> JobKey | None:
    """The job a submitted ``entry`` made, where its chain starts (None: not submitted)."""
    if entry.state is not S.SUBMITTED or not entry.job_id:
        return None
    return JobKey(JobKind(run.mode.kind), entry.job_id)


def settled(
    run: Run, entry: Entry, chains: Mapping[JobKey, Chain], owing: Set[JobKey] = frozenset()
) -> bool:
    """``entry`` is rejected, or submitted with its chain (``chains``, by its own job) ended
    and the final job's event on the bus, and is not ``owing`` a batch item retry's."""
    if entry.state in OPEN:
        return False
    key = submitted_key(run, entry)
    if key is None:
        return entry.state is S.REJECTED
    if key in owing:
        return False
    chain = chains.get(key)
    final = chain.final if chain is not None else None
    return final is not None and final.outbox_at is None


def first_unsettled(
    run: Run,
    start: int,
    entries: Sequence[Entry],
    chains: Mapping[JobKey, Chain],
    owing: Set[JobKey] = frozenset(),
) -> int:
    """The first index from ``start`` not settled, of ``entries`` read from there (an index
    missing from them is not settled); ``start + len`` when all are."""
    by_index = {e.index: e for e in entries}
    for index in range(start, start + len(entries)):
        entry = by_index.get(index)
        if entry is None or not settled(run, entry, chains, owing):
            return index
    return start + len(entries)


@dataclass(frozen=True)
class RunManifest:
    """A complete run's manifest: where it is stored, and what it says."""

    key: str
    body: dict[str, Any]


def _kept_event(row: LedgerRow) -> Mapping[str, Any]:
    """The detail of the row's kept event ({} for a row settled without one)."""
    if row.outbox_event is None:
        return {}
    try:
        return OutcomeEvent.from_json(row.outbox_event).detail
    except (ValueError, KeyError):
        return {}


def _keys(row: LedgerRow) -> list[str]:
    """The objects a settled job left, as its event named them."""
    detail = _kept_event(row)
    keys = [str(k) for k in detail.get("keys") or ()]
    for name in ("manifest_key", "record_key"):
        if name in detail:
            keys.append(str(detail[name]))
    return keys


def _urls_of(
    run: Run, entry: Entry, chain: Chain | None, batch_items: BatchItems
) -> Iterable[dict[str, Any]]:
    """One record per URL of ``entry``: the job that ended its chain, its outcome and keys."""
    row = chain.final if chain is not None else None
    base: dict[str, Any] = {"entry": entry.index, "job_id": entry.job_id}
    if entry.state is S.REJECTED or chain is None or row is None:
        rejected: dict[str, Any] = {"outcome": REJECTED, "reason": entry.reason, "keys": []}
        return [{**base, "url": url, **rejected} for url in entry.urls]
    base["job_id"] = row.key.job_id  # the job that ended the chain
    if len(chain.rows) > 1:
        base["chain"] = list(chain.job_ids)
    items = _batch_items(run, row, batch_items)
    if items:
        return [{**base, "url": url, **_item_record(items.get(url))} for url in entry.urls]
    return [{**base, "url": url, **_row_record(row)} for url in entry.urls]


def _row_record(row: LedgerRow) -> dict[str, Any]:
    """A job's outcome, keys and reason, as its row and its kept event give them."""
    record = {"outcome": row.outcome.value if row.outcome else None, "keys": _keys(row)}
    if (reason := row.detail.get("reason")) is not None:
        record["reason"] = reason
    return record


def _batch_items(run: Run, row: LedgerRow, batch_items: BatchItems) -> dict[str, Mapping[str, Any]]:
    """A stored batch's items by URL, from its own manifest ({} for any other job)."""
    if run.mode is not RunMode.BATCH or row.outcome is not Outcome.STORED:
        return {}
    manifest = batch_items(row.key.job_id) or {}
    return {str(item.get("url")): item for item in manifest.get("items") or ()}


def _item_record(item: Mapping[str, Any] | None) -> dict[str, Any]:
    """A batch URL's outcome and keys as its batch's manifest gives them (none: no item)."""
    if item is None:
        return {"outcome": NO_ITEM, "keys": []}
    return {
        "outcome": item["status"],
        "keys": list(item.get("keys") or ()),
        "item": item.get("index"),
    }


def build(
    run: Run,
    entries: Sequence[Entry],
    chains: Mapping[JobKey, Chain],
    batch_items: BatchItems,
    completed_at: float,
) -> RunManifest:
    """The manifest of ``run``: every URL in entry order, counts and tokens (every job of
    every chain)."""
    urls: list[dict[str, Any]] = []
    tokens = 0
    jobs = 0
    for entry in sorted(entries, key=lambda e: e.index):
        key = submitted_key(run, entry)
        chain = chains.get(key) if key else None
        if chain is not None:
            jobs += len(chain.rows)
            tokens += sum(_count(row.detail.get(DETAIL_TOKENS)) for row in chain.rows)
        urls.extend(_urls_of(run, entry, chain, batch_items))
    by_outcome = Counter(str(u["outcome"]) for u in urls)
    counts = {"urls": len(urls), "jobs": jobs, **dict(sorted(by_outcome.items()))}
    body = {
        "manifest_version": MANIFEST_VERSION,
        "run": run.name,
        "mode": run.mode.value,
        "created_at": run.created_at,
        "completed_at": round(completed_at, 3),
        "counts": counts,
        "tokens_charged": tokens,
        "urls": urls,
    }
    return RunManifest(run_manifest_key(run.name), body)


def _count(text: str | None) -> int:
    try:
        return int(text) if text else 0
    except ValueError:
        return 0  # a detail written by hand, or by another version: not a charge


def run_event_id(run: Run) -> str:
    """The run's Run Completed id: the same for every emit, new for a new run of the name."""
    text = f"run#{run.name}#{run.created_at:.3f}#completed"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def completed_event(run: Run, manifest: RunManifest, bucket: str) -> OutcomeEvent:
    """The run's ``Run Completed`` event: its manifest's key, counts and tokens."""
    return OutcomeEvent(
        DetailType.RUN_COMPLETED,
        {
            "event_id": run_event_id(run),
            "run": run.name,
            "mode": run.mode.value,
            "bucket": bucket,
            "manifest_key": manifest.key,
            "counts": dict(manifest.body["counts"]),
            "tokens_charged": manifest.body["tokens_charged"],
            "completed_at": manifest.body["completed_at"],
        },
    )
