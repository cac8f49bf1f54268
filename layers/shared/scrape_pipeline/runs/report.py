"""What a submitter tells: each entry's news (``Event``), a run after one call (``RunReport``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.outcomes import Outcome
from scrape_pipeline.runs.plan import Run


class EventKind(StrEnum):
    """What happened to an entry, as the submitter tells its listener."""

    SUBMITTED = "submitted"
    ADOPTED = "adopted"
    REJECTED = "rejected"
    IN_DOUBT = "in_doubt"
    WAITING = "waiting"  # for the lease of an entry another submitter holds
    CATCHING_UP = "catching_up"  # in doubt: waiting for the job list to cover its POST


@dataclass(frozen=True)
class Event:
    """An entry's news; ``api_status`` is the job's status as the API last gave it."""

    kind: EventKind
    entry: Entry
    api_status: str | None = None


@dataclass(frozen=True)
class Planned:
    """A run as planning found it: ``resumed`` counts its entries by state (empty: new)."""

    run: Run
    created: bool
    resumed: dict[EntryState, int]


@dataclass(frozen=True)
class RunReport:
    """Where a run stands after one ``submit`` call."""

    run: Run
    planned_now: bool
    resumed: dict[EntryState, int]  # the states found at the start (empty: planned now)
    entries: list[Entry]
    posts: int  # POSTs this call sent
    stopped: Outcome | None = None  # why the call stopped with entries left planned
    cut: bool = False  # the caller's time ran out (a Lambda near its timeout)
    pause_s: float = 0.0  # how long the API asked to be left alone when the call ended
    counts: dict[EntryState, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", dict(Counter(e.state for e in self.entries)))

    def where(self, state: EntryState) -> list[Entry]:
        """The entries in ``state``."""
        return [e for e in self.entries if e.state is state]

    @property
    def complete(self) -> bool:
        """Every entry submitted."""
        return self.counts.get(EntryState.SUBMITTED, 0) == len(self.entries)


@dataclass(frozen=True)
class CatchingUp:
    """``count`` entries in doubt whose look-up waits for the job list, the last until
    ``until`` (our clock), under a listing lag of ``lag_s`` seconds."""

    count: int
    until: float
    lag_s: float

    @property
    def why(self) -> str:
        """The line a user reads."""
        clock = time.strftime("%H:%M:%S", time.gmtime(self.until))
        return (
            f"{self.count} URL(s) in doubt: waiting until {clock} UTC for the job list to "
            f"catch up (listing lag {self.lag_s:.0f} s)"
        )


def catching_up(doubts: Sequence[Entry], lag_s: float, now: float) -> CatchingUp | None:
    """The entries of ``doubts`` posted less than ``lag_s`` before ``now`` (None: none is)."""
    ready = [(e.posted_at if e.posted_at is not None else now) + lag_s for e in doubts]
    waiting = [at for at in ready if at > now]
    if not waiting:
        return None
    return CatchingUp(len(waiting), max(waiting), lag_s)
