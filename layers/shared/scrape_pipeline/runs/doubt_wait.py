"""Entries in doubt the job list may not cover yet: until when, and how that is said.

An extract whose POST's answer was lost is looked up in the job list, and posted again only
when that look-up, made at least the listing lag allowed for after the POST
(``scrape_pipeline.listing_lag``), finds nothing. Before then the entry stays in doubt: the
CLI waits and says so, the submitter function continues the run when the list has caught up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from scrape_pipeline.runs.journal import Entry


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


__all__: Sequence[str] = ("CatchingUp", "catching_up")
