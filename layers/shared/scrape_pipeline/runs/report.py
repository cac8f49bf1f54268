"""What a submitter tells: each entry's news (``Event``), a run after one call (``RunReport``),
and what a failed POST means for its entry: not acted on (posted again), refused, or in doubt
(the answer lost after sending: looked up, never re-posted blind)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from scrape_pipeline.geonode.errors import APIError, GeonodeError, TransportError
from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import Run


class Verdict(StrEnum):
    """What a POST's failure says about whether the API acted on it."""

    NOT_ACTED = "not_acted"
    OUT_OF_BALANCE = "out_of_balance"
    UNAUTHORIZED = "unauthorized"
    REJECTED = "rejected"
    IN_DOUBT = "in_doubt"

    @property
    def stops_run(self) -> bool:
        """The next POST would fail the same way: the run stops, its entries left planned."""
        return self in (Verdict.OUT_OF_BALANCE, Verdict.UNAUTHORIZED)


# The 4xx answers that are not a rejection of this POST (408: the request was never read).
_BY_STATUS: Final[Mapping[int, Verdict]] = {
    401: Verdict.UNAUTHORIZED,
    402: Verdict.OUT_OF_BALANCE,
    403: Verdict.UNAUTHORIZED,
    408: Verdict.NOT_ACTED,
    429: Verdict.NOT_ACTED,
}


@dataclass(frozen=True)
class Outcome:
    """A verdict, the reason kept on the entry, and the wait the API asked for (seconds)."""

    verdict: Verdict
    reason: str
    retry_after: float | None = None


def classify(error: GeonodeError) -> Outcome:
    """The outcome of a POST that raised ``error``."""
    if isinstance(error, TransportError):
        verdict = Verdict.IN_DOUBT if error.request_sent else Verdict.NOT_ACTED
        return Outcome(verdict, str(error))
    if not isinstance(error, APIError):
        return Outcome(Verdict.IN_DOUBT, str(error))
    return Outcome(_verdict(error.status_code), _reason(error), error.retry_after)


def _verdict(status: int) -> Verdict:
    """A 2xx the client could not read or a 5xx: the API may have acted."""
    if status < 400 or status >= 500:
        return Verdict.IN_DOUBT
    return _BY_STATUS.get(status, Verdict.REJECTED)


def _reason(error: APIError) -> str:
    """``HTTP 422 VALIDATION_ERROR: url: ...``."""
    text = f"HTTP {error.status_code}" + (f" {error.code}" if error.code else "")
    return f"{text}: {error.message}" if error.message else text


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
