"""The demo's judge: what became of each unit of work, from outside the pipeline.

Two witnesses only: the simulator's record (what each job really did) and the bucket's object
versions (what the pipeline wrote, and what it later took back). The ledger is never asked.

A key is *live* when its latest version is an object, not a delete marker: the processor
retires a dead-letter record (a versioned delete) when a job closed as "unknown job" or
"never settled" settles after all and is stored, so an old record under a delete marker is
history, not an outcome; one that ends dead-lettered for another reason has its record retired
and written anew, so the live record gives its last outcome. A unit's dead letter is its own
record or, for a batch item or a crawl page, its whole batch's or crawl's record (a poison or
never-settled batch is dead-lettered as one job; the simulator never fails a whole batch, so
such a record always speaks for every item):

    processed twice        a key written again without a take-back (more object versions
                           than its delete markers plus one), or a unit with a live result
                           and a live dead letter
    wrongly dead-lettered  a live dead letter for a unit the simulator completed, unless the
                           job is poison (its every GET answers malformed)
    poisoned               a poison unit with a live dead letter and no result (right)
    poison mishandled      a poison unit with a live result, or whose record gives another
                           reason than the processor's "failed on every attempt"
    lost                   a settled unit with no live result, no live dead letter, not
                           cancelled and not resubmitted

Deliveries answered 401 are judged by the simulator's delivery record (``refusals``): one
signed with a secret still valid (current, or retired within the grace) was wrongly refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# The processor's reason for a job whose every attempt failed: what a poison job's record says.
from scrape_pipeline.jobs import REASON_POISON

__all__ = [
    "REASON_POISON",
    "Listing",
    "Outcome",
    "Refusals",
    "Unit",
    "Verdict",
    "judge",
    "read_listing",
    "refusals",
]

# Simulator statuses of work that has not settled yet: not judged.
UNSETTLED = ("queued", "processing")
# Examples kept per finding: enough to start from, short enough to print.
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class Unit:
    """One piece of work the user cares about: an extract job, a batch item, a crawl page."""

    kind: str  # extract | batch | crawl
    job_id: str
    index: int | None

    @property
    def result_key(self) -> str:
        """The metadata object the processor writes last when it stores this unit."""
        base = f"results/{self.kind}/{self.job_id}"
        return (
            f"{base}/metadata.json"
            if self.index is None
            else f"{base}/{self.index:05d}/metadata.json"
        )

    @property
    def dead_letter_key(self) -> str:
        """This unit's own dead-letter record."""
        base = f"dead-letters/{self.kind}/{self.job_id}"
        return f"{base}.json" if self.index is None else f"{base}/{self.index:05d}.json"

    @property
    def job_dead_letter_key(self) -> str:
        """The record of the whole job (for an extract job, its own record)."""
        return f"dead-letters/{self.kind}/{self.job_id}.json"


@dataclass
class Listing:
    """The bucket as one ``list_object_versions`` pass shows it."""

    live: set[str] = field(default_factory=set)  # latest version is an object
    versions: Counter[str] = field(default_factory=Counter)  # object versions (no markers)
    retired: Counter[str] = field(default_factory=Counter)  # delete markers (take-backs)

    @classmethod
    def from_pages(cls, pages: Iterable[Mapping[str, Any]]) -> Listing:
        """From the pages of ``list_object_versions`` (``Versions`` and ``DeleteMarkers``)."""
        listing = cls()
        for page in pages:
            for version in page.get("Versions", []):
                listing.versions[version["Key"]] += 1
                if version.get("IsLatest"):
                    listing.live.add(version["Key"])
            # A key whose latest entry is a delete marker has no IsLatest version: not live.
            for marker in page.get("DeleteMarkers", []):
                listing.retired[marker["Key"]] += 1
        return listing

    def dead_letter(self, unit: Unit) -> str | None:
        """The live dead-letter record that speaks for ``unit``, if any."""
        if unit.dead_letter_key in self.live:
            return unit.dead_letter_key
        if unit.job_dead_letter_key in self.live:
            return unit.job_dead_letter_key
        return None


def read_listing(s3: Any, bucket: str) -> Listing:
    """One pass over the bucket's versions."""
    return Listing.from_pages(s3.get_paginator("list_object_versions").paginate(Bucket=bucket))


class Outcome(StrEnum):
    """What the judge says became of one unit (the audit's verdicts map onto these)."""

    STORED = "stored"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"
    RESUBMITTED = "resubmitted"
    LOST = "lost"
    UNSETTLED = "unsettled"  # queued or processing in the simulator: not judged


@dataclass
class Verdict:
    """The judge's counts, in units (extract jobs, batch items, crawl pages) unless named."""

    settled: int = 0
    stored: int = 0
    resubmitted: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    lost: int = 0
    processed_twice: int = 0
    wrongly_dead_lettered: int = 0
    poisoned: int = 0
    poison_mishandled: int = 0
    lost_examples: list[str] = field(default_factory=list)
    twice_examples: list[str] = field(default_factory=list)
    wrongly_examples: list[str] = field(default_factory=list)
    poison_examples: list[str] = field(default_factory=list)
    # Every stored unit with its simulator row: for the latency and large-result checks.
    stored_units: list[tuple[Unit, Mapping[str, Any]]] = field(default_factory=list)
    # Every unit's outcome, and every key written again (not capped like the examples): what
    # the audit is compared with (``scrape_pipeline_local.agreement``).
    outcomes: dict[Unit, Outcome] = field(default_factory=dict)
    rewritten: list[str] = field(default_factory=list)


def judge(
    units: Iterable[tuple[Unit, Mapping[str, Any]]],
    listing: Listing,
    *,
    is_poison: Callable[[str], bool],
    resubmitted: Callable[[Mapping[str, Any]], bool],
    reason_of: Callable[[str], str | None],
    into: Verdict | None = None,
) -> Verdict:
    """Judge every settled unit against the bucket; ``reason_of`` reads a record's reason."""
    verdict = into if into is not None else Verdict()
    for unit, job in units:
        status = job["status"]
        if status in UNSETTLED:
            verdict.outcomes[unit] = Outcome.UNSETTLED
            continue
        verdict.settled += 1
        stored = unit.result_key in listing.live
        dead = listing.dead_letter(unit)
        poison = is_poison(unit.job_id)
        name = f"{unit.kind} {unit.job_id} {unit.index}"
        if stored and dead is not None:
            verdict.processed_twice += 1
            _note(verdict.twice_examples, f"{unit.result_key} + {dead}")
        if dead is not None and status == "completed" and not poison:
            verdict.wrongly_dead_lettered += 1
            _note(verdict.wrongly_examples, dead)
        if poison and (stored or (dead is not None and reason_of(dead) != REASON_POISON)):
            verdict.poison_mishandled += 1
            _note(verdict.poison_examples, name)
        if stored:
            verdict.stored += 1
            verdict.stored_units.append((unit, job))
            outcome = Outcome.STORED
        elif dead is not None:
            verdict.dead_lettered += 1
            if poison:
                verdict.poisoned += 1
            outcome = Outcome.DEAD_LETTERED
        elif status == "cancelled":
            verdict.cancelled += 1
            outcome = Outcome.CANCELLED
        elif resubmitted(job):
            verdict.resubmitted += 1
            outcome = Outcome.RESUBMITTED
        else:
            verdict.lost += 1
            _note(verdict.lost_examples, name)
            outcome = Outcome.LOST
        verdict.outcomes[unit] = outcome
    for key, count in listing.versions.items():
        if count - listing.retired[key] > 1:
            verdict.processed_twice += 1
            verdict.rewritten.append(key)
            _note(verdict.twice_examples, key)
    return verdict


def _note(examples: list[str], example: str) -> None:
    if len(examples) < MAX_EXAMPLES:
        examples.append(example)


# A rotation's switch: the API signs with the new secret at once, the bundle holds it a moment
# later, and a receiver that forced a refresh within SECRET_REFRESH_MIN_SECONDS (5 s) reads it
# only after that. A 401 this soon after a rotation is the switch's (the delivery log replays
# it), not a secret the receiver wrongly refused.
SWITCH_SECONDS = 10.0


@dataclass
class Refusals:
    """Deliveries answered 401, by whether the secret that signed them was still valid."""

    valid: list[str] = field(default_factory=list)  # delivery ids: wrongly refused
    retired: int = 0  # signed with a secret retired longer than the grace ago: rightly


def refusals(
    attempts: Iterable[Mapping[str, Any]],
    rotated_at: Mapping[str, Sequence[float]],
    grace_s: float,
) -> Refusals:
    """Judge each 401 by the simulator's record: which secret signed it, when each retired.

    ``rotated_at``: per subscription, when each rotation happened (the simulator's record);
    rotation n retires the secret numbered n - 1. A secret is valid from its switch on until
    ``grace_s`` after it was retired.
    """
    found = Refusals()
    for attempt in attempts:
        if attempt["http_status"] != 401 or attempt["delivered_at"] is None:
            continue
        times = rotated_at.get(str(attempt["subscription_id"]), ())
        signed_with = int(attempt["secret_rotation"])
        at = float(attempt["delivered_at"])
        if signed_with < len(times) and at >= times[signed_with] + grace_s:
            found.retired += 1
        elif signed_with == 0 or at >= times[signed_with - 1] + SWITCH_SECONDS:
            found.valid.append(str(attempt["delivery_id"]))
    return found
