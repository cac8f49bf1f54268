"""The run journal: every verb is one conditional write of the move table (``moves``); a
store (the stack's table, or the CLI's file) implements the reads and that one write."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.runs import moves
from scrape_pipeline.runs.moves import EntryState, Guard, Move
from scrape_pipeline.runs.plan import Run, RunMode, RunSpec

DEFAULT_LEASE_S: Final = 300.0
LEASE_LOST = "its submitter stopped mid-POST (the posting lease ran out)"
HOLDER_GONE = "its submitter's process is gone (it stopped mid-POST)"


class JournalError(PipelineError):
    """Base of the journal's errors."""


class RunMismatchError(JournalError):
    """``name`` already names a run planned differently (its fingerprint differs)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"run {name!r} was planned from other URLs, mode or options; "
            "give another --run name, or leave it out to derive one"
        )
        self.name = name


class MoveRefusedError(JournalError):
    """A move's condition failed; ``entry`` is the entry as it is now (None: no such entry)."""

    def __init__(self, move: Move, run: str, index: int, entry: Entry | None) -> None:
        where = entry.state.value if entry is not None else "absent"
        super().__init__(f"{move.verb} refused for {run}#{index}: the entry is {where}")
        self.move = move
        self.entry = entry


@dataclass(frozen=True)
class Entry:
    """One POST of a run: its URLs and where it is."""

    run: str
    index: int
    urls: tuple[str, ...]
    state: EntryState
    job_id: str | None = None
    reason: str | None = None
    owner: str | None = None
    lease_until: float | None = None
    posted_at: float | None = None  # when the latest POST was claimed
    doubted_at: float | None = None
    updated_at: float | None = None
    announced: bool = False

    def label(self) -> str:
        """``#3 https://...`` or ``#0 (1000 URLs from https://...)``."""
        if len(self.urls) == 1:
            return f"#{self.index} {self.urls[0]}"
        return f"#{self.index} ({len(self.urls)} URLs from {self.urls[0]})"


# The fields a move may write; a backend stores each under this name.
FIELDS: Final = (
    "state",
    "job_id",
    "reason",
    "owner",
    "lease_until",
    "posted_at",
    "doubted_at",
    "updated_at",
    "announced",
)


class Journal(ABC):
    """Every verb a submitter makes, each one ``_write`` of its move (``moves.MOVES`` says
    why); a store (the stack's table, the CLI's file) implements the reads and that write."""

    def __init__(self, *, lease_s: float = DEFAULT_LEASE_S) -> None:
        if lease_s <= 0:
            raise ValueError("lease_s must be positive")
        self.lease_s = lease_s

    def plan(self, spec: RunSpec, name: str, now: float) -> tuple[Run, bool]:
        """Plan ``spec`` as ``name`` in one atomic write; an existing run must be the same."""
        run = Run.planned(name, spec, now)
        entries = [
            Entry(name, index, urls, EntryState.PLANNED, updated_at=now)
            for index, urls in enumerate(spec.chunks())
        ]
        if self._insert_run(run, entries):
            return run, True
        existing = self.run(name)
        if existing is None or existing.fingerprint != run.fingerprint:
            raise RunMismatchError(name)
        return existing, False

    def claim(self, entry: Entry, owner: str, now: float) -> Entry:
        values = {"owner": owner, "lease_until": now + self.lease_s, "posted_at": now}
        return self._move(moves.CLAIM, entry, now, values)

    def submit(self, entry: Entry, owner: str, job_id: str, now: float) -> Entry:
        values = {"job_id": job_id, "lease_until": None, "reason": None}
        return self._move(moves.SUBMIT, entry, now, values, holder=owner)

    def reject(self, entry: Entry, owner: str, reason: str, now: float) -> Entry:
        values = {"reason": reason, "lease_until": None}
        return self._move(moves.REJECT, entry, now, values, holder=owner)

    def release(self, entry: Entry, owner: str, reason: str, now: float) -> Entry:
        values = {"reason": reason, "owner": None, "lease_until": None}
        return self._move(moves.RELEASE, entry, now, values, holder=owner)

    def doubt(self, entry: Entry, owner: str, reason: str, now: float) -> Entry:
        values = {"reason": reason, "lease_until": None, "doubted_at": now}
        return self._move(moves.DOUBT, entry, now, values, holder=owner)

    def expire(self, entry: Entry, now: float) -> Entry:
        values = {"reason": LEASE_LOST, "lease_until": None, "doubted_at": now}
        return self._move(moves.EXPIRE, entry, now, values)

    def abandon(self, entry: Entry, holder: str, now: float) -> Entry:
        values = {"reason": HOLDER_GONE, "lease_until": None, "doubted_at": now}
        return self._move(moves.ABANDON, entry, now, values, holder=holder)

    def adopt(self, entry: Entry, job_id: str, now: float) -> Entry:
        return self._move(moves.ADOPT, entry, now, {"job_id": job_id, "reason": None})

    def reclaim(self, run: Run, entry: Entry, owner: str, now: float) -> Entry:
        values = {"owner": owner, "lease_until": now + self.lease_s, "posted_at": now}
        return self._move(moves.RECLAIM, entry, now, values, mode=run.mode)

    def announce(self, entry: Entry, now: float) -> Entry:
        return self._move(moves.ANNOUNCE, entry, now, {"announced": True})

    def repost(self, run: Run, entry: Entry, now: float) -> Entry:
        values = {"owner": None, "lease_until": None, "job_id": None}
        return self._move(moves.REPOST, entry, now, values, mode=run.mode)

    def _move(
        self,
        move: Move,
        entry: Entry,
        now: float,
        values: Mapping[str, Any],
        *,
        holder: str | None = None,
        mode: RunMode | None = None,
    ) -> Entry:
        """One conditional write of ``move``; MoveRefusedError with the entry as it is now."""
        if not move.admits(mode):
            raise MoveRefusedError(move, entry.run, entry.index, entry)
        # A run guard was checked above, against the run: the backend checks the state only.
        stored = replace(move, guard=Guard.NONE) if move.guard in moves.RUN_GUARDS else move
        written = {**values, "updated_at": now}
        if move.target is not None:
            written["state"] = move.target
        guard_value: Any = {Guard.HOLDER: holder, Guard.LEASE_EXPIRED: now}.get(move.guard)
        moved = self._write(entry.run, entry.index, stored, guard_value, written)
        if moved is None:
            raise MoveRefusedError(move, entry.run, entry.index, self.entry(entry.run, entry.index))
        return moved

    @abstractmethod
    def _insert_run(self, run: Run, entries: Sequence[Entry]) -> bool:
        """Store the run and its entries if no run has its name, atomically; True if stored."""

    @abstractmethod
    def run(self, name: str) -> Run | None:
        """The run record, or None."""

    @abstractmethod
    def entries(self, name: str, states: Collection[EntryState] = ()) -> list[Entry]:
        """The run's entries in index order, only those in ``states`` when given."""

    @abstractmethod
    def entry(self, name: str, index: int) -> Entry | None:
        """One entry, or None."""

    @abstractmethod
    def holder(self, kind: str, job_id: str) -> str | None:
        """The run whose entry holds the ``kind`` job ``job_id`` (None: no run's)."""

    @abstractmethod
    def _write(
        self, run: str, index: int, move: Move, guard_value: Any, values: Mapping[str, Any]
    ) -> Entry | None:
        """Write ``values`` if the entry's state is in ``move.sources`` and ``move.guard`` holds
        against ``guard_value``; the entry as written, or None."""
