"""What became of the batch items and crawl pages that failed retryably, judged from outside.

Two witnesses, as for the demo's judge (``scrape_pipeline_local.judge``): the simulator's
record (each item that failed retryably; each extract job posted for its URL since the batch
or crawl was created, how it ended and how often its GET was answered) and the bucket's live
objects. Each such item should end one way only:

    stored                 exactly one of its retries has a live result
    dead-lettered          its retry failed for good (or each of its ``bound`` POSTs failed
                           retryably), that retry's record live
    left dead-lettered     a live dead letter under the batch or crawl itself (not retried)
    stored twice           more than one live result: its own, or two retries'
    unresolved             none of these (no retry, or a retry with no outcome)

and cost at most ``bound`` POSTs (items of one URL are judged together).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline_local.judge import MAX_EXAMPLES, Listing, Unit

# The simulator's kinds of the units a batch or crawl is made of, and theirs in S3.
ITEM_KINDS: Mapping[str, str] = {"batch_item": "batch", "crawl_page": "crawl"}
# The route the simulator counts an extract job's own GETs under.
EXTRACT_GET = "GET /v1/extract/{job_id}"


@dataclass
class ItemRetries:
    """The counts, in items; ``posts`` and ``gets`` are the Geonode requests their retries
    cost (POST /v1/extract, and the retry jobs' own GETs)."""

    retryable: int = 0
    stored: int = 0
    dead_lettered: int = 0
    left_dead_lettered: int = 0
    stored_twice: int = 0
    unresolved: int = 0
    posts: int = 0
    posts_max: int = 0  # the most an item cost: its URL's POSTs shared out, rounded up
    gets: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def requests_per_item(self) -> float:
        """The Geonode requests a retried item cost on top of its batch's or crawl's."""
        return (self.posts + self.gets) / max(1, self.retryable)

    @property
    def mishandled(self) -> int:
        """Items left dead-lettered without a retry, stored twice, or with no outcome."""
        return self.left_dead_lettered + self.stored_twice + self.unresolved

    def rows(self) -> list[tuple[str, str]]:
        """The demo report's rows (none when no item failed retryably)."""
        if not self.retryable:
            return []
        said = (
            f"{self.retryable}: {self.stored} stored, {self.dead_lettered} dead-lettered by "
            f"the retry; {self.requests_per_item:.2f} requests each"
        )
        return [
            ("batch items and crawl pages retried", said),
            ("ITEMS NOT RETRIED, UNRESOLVED OR STORED TWICE", str(self.mishandled)),
        ]

    def line(self) -> str:
        """The figures in one line."""
        return (
            f"retryable={self.retryable} stored={self.stored} "
            f"dead_lettered={self.dead_lettered} "
            f"left_dead_lettered={self.left_dead_lettered} stored_twice={self.stored_twice} "
            f"unresolved={self.unresolved} posts={self.posts} posts_max={self.posts_max} "
            f"gets={self.gets} requests/item={self.requests_per_item:.2f}"
        )


def judge_item_retries(
    units: Iterable[Mapping[str, Any]],
    listing: Listing,
    *,
    gets_by_job: Mapping[str, Mapping[str, int]],
    bound: int,
) -> ItemRetries:
    """Judge every item of ``units`` (the simulator's truth rows, every kind) that failed
    retryably, against the bucket's live objects.

    Items of one URL are judged together (crawls of one site share pages, a batch may hold a
    URL twice): the extract jobs posted for it since the first of them was created are their
    retries, and no record says which retries which; so the group's live results must number
    its items, and its POSTs at most ``bound`` each."""
    rows = list(units)
    extracts = [row for row in rows if row["kind"] == "extract"]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        kind = ITEM_KINDS.get(str(row["kind"]))
        if kind is not None and row["status"] == "failed" and row["retryable"]:
            groups.setdefault(str(row["url"]), []).append(row)
    found = ItemRetries()
    for url, items in groups.items():
        since = min(float(item["created_at"]) for item in items)
        retries = sorted(
            (j for j in extracts if j["url"] == url and float(j["created_at"]) >= since),
            key=lambda j: float(j["created_at"]),
        )
        found.retryable += len(items)
        found.posts += len(retries)
        # Per item, a URL's POSTs shared out (rounded up): within the bound iff the group's are.
        found.posts_max = max(found.posts_max, -(-len(retries) // len(items)))
        found.gets += sum(
            gets_by_job.get(str(j["job_id"]), {}).get(EXTRACT_GET, 0) for j in retries
        )
        _judge_group(found, url, [_unit(i) for i in items], retries, listing=listing, bound=bound)
    return found


def _unit(row: Mapping[str, Any]) -> Unit:
    return Unit(ITEM_KINDS[str(row["kind"])], str(row["job_id"]), int(row["index"]))


def _judge_group(
    found: ItemRetries,
    url: str,
    items: list[Unit],
    retries: list[Mapping[str, Any]],
    *,
    listing: Listing,
    bound: int,
) -> None:
    """The items that failed retryably with ``url``, judged from their retries' objects."""
    for unit in items:
        if unit.dead_letter_key in listing.live:
            found.left_dead_lettered += 1
            _note(found, f"{unit.kind} {unit.job_id} {unit.index}: dead-lettered, not retried")
    own = [unit.result_key for unit in items if unit.result_key in listing.live]
    stored = [
        j for j in retries if Unit("extract", str(j["job_id"]), None).result_key in listing.live
    ]
    # A retry ends dead-lettered when it failed for good, or retryably once its bound was spent.
    dead = sum(
        1
        for j in retries
        if j["status"] == "failed"
        and Unit("extract", str(j["job_id"]), None).dead_letter_key in listing.live
        and (not j["retryable"] or len(retries) >= bound)
    )
    results = len(own) + len(stored)
    found.stored += min(results, len(items))
    if results > len(items):
        found.stored_twice += results - len(items)
        _note(found, f"{url}: {results} results for {len(items)} items")
    found.dead_lettered += min(dead, max(0, len(items) - results))
    missing = len(items) - results - dead
    if missing > 0:
        found.unresolved += missing
        _note(found, f"{url}: {len(items)} items, {len(retries)} retries, {results} stored")


def _note(found: ItemRetries, example: str) -> None:
    if len(found.examples) < MAX_EXAMPLES:
        found.examples.append(example)
