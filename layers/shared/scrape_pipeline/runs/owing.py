"""A run's stored batches whose item retries still owe their outcome event: the run is not
complete before each URL's final outcome is on the bus."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.chains import Chain, RowReader

# A stored batch's own manifest by job id (None: not there).
type BatchItems = Callable[[str], Mapping[str, Any] | None]


def _retry_jobs(manifest: Mapping[str, Any] | None) -> list[str]:
    """The final jobs of the batch's retried items, as its manifest names them."""
    items = (manifest or {}).get("items") or ()
    return [str(i["retry_job"]) for i in items if isinstance(i, Mapping) and i.get("retry_job")]


def _stored_batch(chain: Chain) -> JobKey | None:
    """The stored batch that ended ``chain`` with its own event sent (None: any other end)."""
    final = chain.final
    if final is None or final.key.kind is not JobKind.BATCH:
        return None
    sent = final.outcome is Outcome.STORED and final.outbox_at is None
    return final.key if sent else None  # not stored: no item retried; unsent: owed already


def retries_owing(
    chains_by_key: Mapping[JobKey, Chain], batch_items: BatchItems, ledger: RowReader
) -> frozenset[JobKey]:
    """The entries (by their own job) whose chain ended at a stored batch with an item's
    retry whose event the bus has not taken yet."""
    retries: dict[JobKey, list[JobKey]] = {}
    for start, chain in chains_by_key.items():
        batch = _stored_batch(chain)
        if batch is not None:
            jobs = _retry_jobs(batch_items(batch.job_id))
            retries[start] = [JobKey(JobKind.EXTRACT, job_id) for job_id in jobs]
    rows = ledger.get_many(key for keys in retries.values() for key in keys)
    owing = {key for key, row in rows.items() if row.outbox_at is not None}
    return frozenset(start for start, keys in retries.items() if owing.intersection(keys))
