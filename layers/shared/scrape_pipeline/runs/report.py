"""What a submitter tells: each entry's news as it happens (``Event``), and where a run stands
after one ``submit`` call (``RunReport``)."""

from __future__ import annotations

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


__all__: Sequence[str] = ("Event", "EventKind", "Planned", "RunReport")
