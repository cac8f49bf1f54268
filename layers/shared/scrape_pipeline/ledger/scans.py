"""The whole table, page by page: for operators and benchmarks, never the pipeline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.jobs import JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger.attributes import Attr, RowPrefix
from scrape_pipeline.ledger.expressions import expressions
from scrape_pipeline.ledger.table import LedgerTable, call

# How many of a batch's or crawl's not-simply-stored jobs ``ItemCounts`` names, at most.
MAX_NAMED = 20


# A batch's or crawl's verdicts that carry a number of items.
RETRYING = "retrying"
WITH_DEAD_LETTERS = "stored with dead-lettered"


def item_verdict(
    state: str, outcome: str | None, *, dead_lettered: int, retrying: int
) -> tuple[str, int]:
    """What a batch's or crawl's row says of its items, and how many items that concerns:
    "stored" only when every item is; "stored with dead-lettered", "retrying" (not finished:
    its row is not DONE), else its outcome or, not DONE, its state."""
    if retrying:
        return RETRYING, retrying
    if state != JobState.DONE:
        return state.lower(), 0
    if outcome == Outcome.STORED and dead_lettered:
        return WITH_DEAD_LETTERS, dead_lettered
    return outcome or "?", 0


def verdict_text(verdict: str, items: int) -> str:
    """The verdict in words: "retrying 12", "stored with 3 dead-lettered", "stored"."""
    if verdict == RETRYING:
        return f"retrying {items}"
    if verdict == WITH_DEAD_LETTERS:
        return f"stored with {items} dead-lettered"
    return verdict


@dataclass
class ItemCounts:
    """Batches' and crawls' items by how they stand (``items``), the jobs by ``item_verdict``
    (``jobs``), and the first ``MAX_NAMED`` jobs not simply stored, in words (``named``)."""

    items: Counter[str] = field(default_factory=Counter)
    jobs: Counter[str] = field(default_factory=Counter)
    named: dict[str, str] = field(default_factory=dict)

    def add(self, pk: str, item: dict[str, Any]) -> None:
        """Count one batch's or crawl's row."""
        retrying = len(item.get(Attr.RETRYING_ITEMS, {}).get("SS", []))
        counts = {
            "stored": _number(item, Attr.ITEMS_STORED),
            "retrying": retrying,
            "dead_lettered": _number(item, Attr.ITEMS_FAILED),
            "cancelled": _number(item, Attr.ITEMS_CANCELLED),
        }
        self.items.update(counts)
        verdict, concerned = item_verdict(
            item.get(Attr.STATE, {}).get("S", "?"),
            item.get(Attr.OUTCOME, {}).get("S"),
            dead_lettered=counts["dead_lettered"],
            retrying=retrying,
        )
        self.jobs[verdict] += 1
        if verdict != Outcome.STORED and len(self.named) < MAX_NAMED:
            self.named[pk] = verdict_text(verdict, concerned)


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


# What ``count_rows(with_items=True)`` reads besides the state and the outcome.
_ITEM_ATTRS = (Attr.ITEMS_STORED, Attr.ITEMS_FAILED, Attr.ITEMS_CANCELLED, Attr.RETRYING_ITEMS)


class Scans(LedgerTable):
    """Every job row, by paginated Scans of a few attributes (bookkeeping rows skipped)."""

    def job_keys(self) -> Iterator[JobKey]:
        """Every job's key (bookkeeping rows skipped), by a paginated Scan of the keys alone."""
        for item in self._scan():
            yield JobKey.from_pk(item[Attr.PK]["S"])

    def count_rows(self, *, with_items: bool = False) -> RowCounts:
        """Job rows by state and DONE rows by outcome, by a paginated Scan of three attributes
        (``with_items``: and of the batches' and crawls' item counts, in the same Scan)."""
        by_state: Counter[str] = Counter()
        by_outcome: Counter[str] = Counter()
        items = ItemCounts() if with_items else None
        for item in self._scan(Attr.STATE, Attr.OUTCOME, *(_ITEM_ATTRS if with_items else ())):
            by_state[item.get(Attr.STATE, {}).get("S", "?")] += 1
            if Attr.OUTCOME in item:
                by_outcome[item[Attr.OUTCOME]["S"]] += 1
            pk = item[Attr.PK]["S"]
            if items is not None and not pk.startswith(f"{JobKind.EXTRACT.value}#"):
                items.add(pk, item)
        return RowCounts(dict(sorted(by_state.items())), dict(sorted(by_outcome.items())), items)

    def created_since(
        self, kind: JobKind, since: float, until: float | None = None
    ) -> Iterator[str]:
        """The ids of ``kind``'s jobs whose rows were written first at or after ``since`` (and
        at or before ``until``), by a filtered Scan (billed as a read of the whole table: an
        operator's call, never the pipeline's)."""
        bound = "#created >= :since" if until is None else "#created BETWEEN :since AND :until"
        values = {":prefix": {"S": f"{kind.value}#"}, ":since": {"N": repr(since)}}
        if until is not None:
            values[":until"] = {"N": repr(until)}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "ProjectionExpression": "#pk",
            "FilterExpression": f"begins_with(#pk, :prefix) AND {bound}",
            "ExpressionAttributeNames": {"#pk": Attr.PK.value, "#created": Attr.CREATED_AT.value},
            "ExpressionAttributeValues": values,
        }
        while True:
            page = call(self.client, "Scan", **request)
            for item in page.get("Items", []):
                yield JobKey.from_pk(item[Attr.PK.value]["S"]).job_id
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _scan(self, *attributes: Attr) -> Iterator[dict[str, Any]]:
        """The job rows' items, projected to the key and ``attributes``, page by page."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            **expressions(projection=(Attr.PK, *attributes)),
        }
        while True:
            page = call(self.client, "Scan", **request)
            for item in page.get("Items", []):
                if not item[Attr.PK]["S"].startswith(tuple(RowPrefix)):
                    yield dict(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
