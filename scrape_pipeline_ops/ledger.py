"""The pipeline's ledger with the operator's whole-table counts: no Lambda scans the table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scrape_pipeline.jobs import JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger import full
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.expressions import Field

MAX_NAMED = 20  # how many batches or crawls not simply stored ``ItemCounts`` names, at most
# What ``count_rows(with_items=True)`` reads besides the state and the outcome.
_ITEM_ATTRS = (Attr.ITEMS_STORED, Attr.ITEMS_FAILED, Attr.ITEMS_CANCELLED, Attr.RETRYING_ITEMS)


def _verdict(state: str, outcome: str | None, dead: int, retrying: int) -> tuple[str, str]:
    """A batch's or crawl's verdict as a key and in words ("retrying 12", "stored with 3
    dead-lettered"): "stored" only when every item is."""
    if retrying:
        return "retrying", f"retrying {retrying}"
    if state != JobState.DONE:
        return state.lower(), state.lower()
    if outcome == Outcome.STORED and dead:
        return "stored with dead-lettered", f"stored with {dead} dead-lettered"
    return outcome or "?", outcome or "?"


def _number(item: dict[str, Any], attr: Attr) -> int:
    return int(item.get(attr, {}).get("N", 0))


@dataclass
class ItemCounts:
    """Batches' and crawls' items by how they stand, the jobs by verdict, and the first
    ``MAX_NAMED`` jobs not simply stored, in words."""

    items: Counter[str] = field(default_factory=Counter)
    jobs: Counter[str] = field(default_factory=Counter)
    named: dict[str, str] = field(default_factory=dict)

    def add(self, pk: str, item: dict[str, Any]) -> None:
        """Count one batch's or crawl's row."""
        counts = {
            "stored": _number(item, Attr.ITEMS_STORED),
            "retrying": len(item.get(Attr.RETRYING_ITEMS, {}).get("SS", [])),
            "dead_lettered": _number(item, Attr.ITEMS_FAILED),
            "cancelled": _number(item, Attr.ITEMS_CANCELLED),
        }
        self.items.update(counts)
        state = item.get(Attr.STATE, {}).get("S", "?")
        outcome = item.get(Attr.OUTCOME, {}).get("S")
        verdict, words = _verdict(state, outcome, counts["dead_lettered"], counts["retrying"])
        self.jobs[verdict] += 1
        if verdict != Outcome.STORED and len(self.named) < MAX_NAMED:
            self.named[pk] = words


@dataclass(frozen=True)
class RowCounts:
    """Job rows by state, DONE rows by outcome, and (asked for) the batches' and crawls' items."""

    by_state: dict[str, int]
    by_outcome: dict[str, int]
    items: ItemCounts | None = None

    @property
    def jobs(self) -> int:
        """How many job rows there are, whatever their state."""
        return sum(self.by_state.values())

    def add(self, item: dict[str, Any]) -> None:
        """Count one job's row (a batch's or crawl's items too, if asked for)."""
        state = item.get(Attr.STATE, {}).get("S", "?")
        self.by_state[state] = self.by_state.get(state, 0) + 1
        if Attr.OUTCOME in item:
            outcome = item[Attr.OUTCOME]["S"]
            self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + 1
        pk = item[Attr.PK]["S"]
        if self.items is not None and not pk.startswith(f"{JobKind.EXTRACT.value}#"):
            self.items.add(pk, item)


def created_since(
    ledger: full.Ledger, kind: JobKind, since: float, until: float | None = None
) -> Iterator[str]:
    """The ids of ``kind``'s jobs first written from ``since`` (to ``until``): a filtered
    Scan, an operator's call billed as the whole table."""
    created, low = Field(Attr.CREATED_AT), Decimal(repr(since))  # exact, not to the ms
    bound = created.gte(low) if until is None else created.between(low, Decimal(repr(until)))
    for item in ledger.scan_jobs(only=Field(Attr.PK).begins_with(f"{kind.value}#") & bound):
        yield JobKey.from_pk(item[Attr.PK.value]["S"]).job_id


class Ledger(full.Ledger):
    """``full.Ledger`` and the operator's paginated Scans of every job row."""

    def job_keys(self) -> Iterator[JobKey]:
        """Every job's key, by a paginated Scan of the keys alone."""
        for item in self.scan_jobs():
            yield JobKey.from_pk(item[Attr.PK]["S"])

    def count_rows(self, *, with_items: bool = False) -> RowCounts:
        """Job rows by state and DONE rows by outcome, by one paginated Scan (``with_items``:
        and the batches' and crawls' item counts)."""
        counts = RowCounts({}, {}, ItemCounts() if with_items else None)
        for item in self.scan_jobs(Attr.STATE, Attr.OUTCOME, *(_ITEM_ATTRS if with_items else ())):
            counts.add(item)
        return RowCounts(
            dict(sorted(counts.by_state.items())),
            dict(sorted(counts.by_outcome.items())),
            counts.items,
        )
