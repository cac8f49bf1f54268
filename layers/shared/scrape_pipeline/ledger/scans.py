"""The whole table, page by page: for operators and benchmarks, never the pipeline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Attr as Field

from scrape_pipeline.jobs import JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger.attributes import Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Condition, expressions
from scrape_pipeline.ledger.table import LedgerTable, call

MAX_NAMED = 20  # how many batches or crawls not simply stored ``ItemCounts`` names, at most
# What ``count_rows(with_items=True)`` reads besides the state and the outcome.
_ITEM_ATTRS = (Attr.ITEMS_STORED, Attr.ITEMS_FAILED, Attr.ITEMS_CANCELLED, Attr.RETRYING_ITEMS)


def _verdict(state: str, outcome: str | None, dead: int, retrying: int) -> tuple[str, str]:
    """What a batch's or crawl's row says of its items, as a key and in words: "stored" only
    when every item is; "retrying 12", "stored with 3 dead-lettered", else its outcome or state."""
    if retrying:
        return "retrying", f"retrying {retrying}"
    if state != JobState.DONE:
        return state.lower(), state.lower()
    return _closed_verdict(outcome, dead)


def _closed_verdict(outcome: str | None, dead: int) -> tuple[str, str]:
    if outcome == Outcome.STORED and dead:
        return "stored with dead-lettered", f"stored with {dead} dead-lettered"
    return outcome or "?", outcome or "?"


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


def _number(item: dict[str, Any], attr: Attr) -> int:
    return int(item.get(attr, {}).get("N", 0))


@dataclass(frozen=True)
class RowCounts:
    """The result of ``Ledger.count_rows``: job rows by state, DONE rows by outcome, and
    (asked for) the batches' and crawls' items."""

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


class Scans(LedgerTable):
    """Every job row, by paginated Scans of a few attributes (bookkeeping rows skipped)."""

    def job_keys(self) -> Iterator[JobKey]:
        """Every job's key, by a paginated Scan of the keys alone."""
        for item in self._scan():
            yield JobKey.from_pk(item[Attr.PK]["S"])

    def count_rows(self, *, with_items: bool = False) -> RowCounts:
        """Job rows by state and DONE rows by outcome, by one paginated Scan (``with_items``:
        and the batches' and crawls' item counts)."""
        counts = RowCounts({}, {}, ItemCounts() if with_items else None)
        for item in self._scan(Attr.STATE, Attr.OUTCOME, *(_ITEM_ATTRS if with_items else ())):
            counts.add(item)
        return RowCounts(
            dict(sorted(counts.by_state.items())),
            dict(sorted(counts.by_outcome.items())),
            counts.items,
        )

    def created_since(
        self, kind: JobKind, since: float, until: float | None = None
    ) -> Iterator[str]:
        """The ids of ``kind``'s jobs whose rows were first written from ``since`` (to
        ``until``), by a filtered Scan: an operator's call, billed as the whole table."""
        created, low = Field(Attr.CREATED_AT), Decimal(repr(since))  # exact, not to the ms
        bound = created.gte(low) if until is None else created.between(low, Decimal(repr(until)))
        for item in self._scan(only=Field(Attr.PK).begins_with(f"{kind.value}#") & bound):
            yield JobKey.from_pk(item[Attr.PK.value]["S"]).job_id

    def _scan(self, *attributes: Attr, only: Condition | None = None) -> Iterator[dict[str, Any]]:
        """The job rows' items, projected to the key and ``attributes``, page by page."""
        request: dict[str, Any] = {"TableName": self.table_name}
        request |= expressions(FilterExpression=only, ProjectionExpression=(Attr.PK, *attributes))
        while True:
            page = call(self.client, "Scan", **request)
            for item in page.get("Items", []):
                if not item[Attr.PK]["S"].startswith(tuple(RowPrefix)):
                    yield dict(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
