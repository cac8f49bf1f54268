"""The run journal's one move table: an entry's states and every write that moves it (a lease
run out goes to in doubt, never back to planned)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from scrape_pipeline.runs.plan import RunMode


class EntryState(StrEnum):
    """Where a journal entry is; ``ABSENT`` is "not planned yet" and is never stored."""

    ABSENT = "absent"
    PLANNED = "planned"
    POSTING = "posting"
    SUBMITTED = "submitted"
    REJECTED = "rejected"
    IN_DOUBT = "in_doubt"


class Guard(StrEnum):
    """A condition beside the state; each journal writes it beside the values it compares."""

    NONE = ""
    HOLDER = "the caller holds the posting claim"
    LEASE_EXPIRED = "the posting lease has run out"
    NOT_ANNOUNCED = "not announced before"
    EXTRACT_RUN = "the run posts extracts (async)"
    BATCH_OR_CRAWL_RUN = "the run posts batches or crawls"


# Guards on the run's mode (fixed at planning): checked against the run record, not stored.
RUN_GUARDS: Final[Mapping[Guard, frozenset[RunMode]]] = {
    Guard.EXTRACT_RUN: frozenset({RunMode.ASYNC}),
    Guard.BATCH_OR_CRAWL_RUN: frozenset({RunMode.BATCH, RunMode.CRAWL}),
}


class Verb(StrEnum):
    """A journal write, named after the ``Journal`` method that makes it."""

    PLAN = "plan"
    CLAIM = "claim"
    SUBMIT = "submit"
    REJECT = "reject"
    RELEASE = "release"
    DOUBT = "doubt"
    EXPIRE = "expire"
    ABANDON = "abandon"
    ADOPT = "adopt"
    RECLAIM = "reclaim"
    ANNOUNCE = "announce"
    REPOST = "repost"


@dataclass(frozen=True)
class Move:
    """A write from one of ``sources`` to ``target`` (None: unchanged), if ``guard`` holds."""

    verb: Verb
    sources: tuple[EntryState, ...]
    target: EntryState | None
    guard: Guard = Guard.NONE
    why: str = ""

    def admits(self, mode: RunMode | None) -> bool:
        """A run of ``mode`` passes this move's run guard (None: the run is not known)."""
        modes = RUN_GUARDS.get(self.guard)
        return modes is None or mode in modes


S, G, V = EntryState, Guard, Verb  # short, so that each move is one line of the table
PLAN = Move(V.PLAN, (S.ABSENT,), S.PLANNED, why="planning a run twice adds nothing")
CLAIM = Move(V.CLAIM, (S.PLANNED,), S.POSTING, why="one submitter posts an entry, under a lease")
SUBMIT = Move(V.SUBMIT, (S.POSTING,), S.SUBMITTED, G.HOLDER, "the API answered with a job id")
REJECT = Move(V.REJECT, (S.POSTING,), S.REJECTED, G.HOLDER, "the API refused it (4xx)")
RELEASE = Move(V.RELEASE, (S.POSTING,), S.PLANNED, G.HOLDER, "certainly not acted on (429, 402)")
DOUBT = Move(V.DOUBT, (S.POSTING,), S.IN_DOUBT, G.HOLDER, "answer lost (timeout, 5xx)")
EXPIRE = Move(V.EXPIRE, (S.POSTING,), S.IN_DOUBT, G.LEASE_EXPIRED, "its submitter died mid-POST")
# The lease's sibling: the holder's process is seen gone (same host); no 300 s wait.
ABANDON = Move(V.ABANDON, (S.POSTING,), S.IN_DOUBT, G.HOLDER, "its holder's process is gone")
ADOPT = Move(V.ADOPT, (S.IN_DOUBT,), S.SUBMITTED, why="a lookup or later evidence found its job")
# No API lists batches or crawls (posting one again may pay twice); an extract is looked up.
RECLAIM = Move(V.RECLAIM, (S.IN_DOUBT,), S.POSTING, G.EXTRACT_RUN, "the lookup found no job")
ANNOUNCE = Move(
    V.ANNOUNCE, (S.SUBMITTED,), None, G.NOT_ANNOUNCED, "a batch or crawl, to the ledger"
)
REPOST = Move(
    V.REPOST, (S.IN_DOUBT,), S.PLANNED, G.BATCH_OR_CRAWL_RUN, "an operator's explicit order"
)
MOVES: Final = (
    PLAN, CLAIM, SUBMIT, REJECT, RELEASE, DOUBT, EXPIRE, ABANDON, ADOPT, RECLAIM, ANNOUNCE,
    REPOST,
)  # fmt: skip
# An entry in one of these is settled for the submitter: nothing more is posted for it.
FINAL: Final = (S.SUBMITTED, S.REJECTED)
