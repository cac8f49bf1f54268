"""The job-list sweep's durable state: its passes, its checkpoint row, the count check under way.

What each field means and why is in the job-list sweep's module docstring
(``scrape_pipeline.joblist``); this module is how that state is held and saved, so the sweep
reads as the algorithm alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scrape_pipeline.sweeps import passes
from scrape_pipeline.sweeps.passes import SavedPass

# Pending passes kept at most; beyond it the two newest are merged and read again from their
# first page. Only a reconciler far behind a heavy account reaches it (each run adds at most
# one pending pass: its fresh one, when cut short).
MAX_PENDING_PASSES = 16
# The overlap covers this many times the measured listing lag: a lag measured is a lower bound
# (a job listed later still was not seen at all).
LAG_MARGIN = 2.0
# A measured lag is remembered this long after it was last seen (Lambda's clock).
LAG_MEMORY_SECONDS = 86_400.0


@dataclass(eq=False)  # passes are told apart by identity
class Pass:
    """A range of the job list, read newest first; ``page`` is the next page to read."""

    start: float
    end: float
    page: int = 1
    done: bool = False  # not saved: a finished pass leaves the checkpoint
    fresh: bool = False  # begun at the watermark this run: its first page moves the watermark
    # A range read again because the count check found jobs listed in it late: a job it finds
    # the ledger does not know was created this far below this watermark (a lag sample).
    lag_from: float | None = None
    # Not saved: the jobs the pass read, by id, with their created_at (a fresh pass's count
    # check counts them).
    seen: dict[str, float] = field(default_factory=dict)

    def saved(self) -> SavedPass:
        return SavedPass(self.start, self.end, self.page, self.lag_from)

    @classmethod
    def from_saved(cls, saved: SavedPass) -> Pass:
        return cls(saved.start, saved.end, saved.page, lag_from=saved.lag_from)


@dataclass
class Checkpoint:
    """The sweep's durable state, one ledger bookkeeping row."""

    watermark: float
    pending: list[Pass] = field(default_factory=list)
    lag: float = 0.0  # the measured listing lag
    lag_seen_at: float = 0.0  # when it was last measured (Lambda's clock)
    moved_at: float = 0.0  # when the watermark last moved (Lambda's clock)
    fresh_end: float = 0.0  # the end of the last fresh pass read (Lambda's clock)
    confirmed: bool = False  # the overlap below it was read again once the lag spread passed
    # The count check (module docstring): a range, the jobs the API listed in it when counted,
    # and the watermark then.
    counted: tuple[int, int, int, float] | None = None

    @classmethod
    def read(
        cls, saved: Mapping[str, str] | None, default_watermark: float, now: float = 0.0
    ) -> Checkpoint:
        """The saved state; rows of earlier versions (no lag, a watermark on Lambda's clock,
        one resumable pass) read as they were meant."""
        if not saved:
            return cls(default_watermark)
        lag, seen_at = number_field(saved, "lag"), number_field(saved, "lag_seen_at")
        if now - seen_at > LAG_MEMORY_SECONDS:
            lag = 0.0  # not seen for a day: the API lists on time again
        return cls(
            float(saved["watermark"]),
            [Pass.from_saved(p) for p in passes.decode(saved)],
            lag,
            seen_at,
            number_field(saved, "moved_at"),
            number_field(saved, "fresh_end"),
            saved.get("confirmed") == "1",
            counted_range(json.loads(saved["counted"])) if saved.get("counted") else None,
        )

    def overlap(self, configured: float) -> float:
        """How far below the watermark a fresh pass starts (module docstring)."""
        return 0.0 if self.confirmed else max(configured, LAG_MARGIN * self.lag)

    def measured(self, lag: float, now: float) -> None:
        """A job was listed ``lag`` seconds below the watermark a pass had already passed."""
        if lag >= self.lag:
            self.lag, self.lag_seen_at = lag, now

    def first_page(
        self, end: float, created: Iterable[float], now: float, *, confirming: bool
    ) -> None:
        """A fresh pass up to ``end`` read its first page, jobs ``created`` then (newest first:
        the newest job the API lists is among them). The watermark moves up to it; one that
        stays where it is confirms the overlap below it, if the pass was ``confirming``."""
        newest = max(created, default=self.watermark)
        self.fresh_end = max(self.fresh_end, end)
        if newest > self.watermark:
            self.watermark, self.moved_at, self.confirmed = newest, now, False
        elif confirming:
            self.confirmed = True

    def drop_finished(self) -> None:
        """A pass read to its end (the one just read, if any) leaves the pending list."""
        self.pending = [p for p in self.pending if not p.done]

    def bound(self) -> None:
        """Merge the two newest pending passes while there are too many (see the constant)."""
        while len(self.pending) > MAX_PENDING_PASSES:
            older, newer = self.pending[-2], self.pending[-1]
            self.pending[-2:] = [Pass(min(older.start, newer.start), max(older.end, newer.end))]

    def fields(self) -> dict[str, str]:
        out = {"watermark": f"{self.watermark:.3f}"}
        if self.lag:
            out.update(lag=f"{self.lag:.3f}", lag_seen_at=f"{self.lag_seen_at:.3f}")
        if self.moved_at:
            out["moved_at"] = f"{self.moved_at:.3f}"
        if self.fresh_end:
            out["fresh_end"] = f"{self.fresh_end:.3f}"
        if self.confirmed:
            out["confirmed"] = "1"
        out.update(passes.encode(p.saved() for p in self.pending))
        if self.counted is not None:
            low, high, count, watermark = self.counted
            out["counted"] = json.dumps([low, high, count, round(watermark, 3)])
        return out


def number_field(saved: Mapping[str, str], name: str) -> float:
    """A number field of the checkpoint; absent (rows of earlier versions) or empty is 0."""
    return float(saved.get(name) or 0.0)


def counted_range(raw: Sequence[float]) -> tuple[int, int, int, float]:
    low, high, count, watermark = raw
    return int(low), int(high), int(count), float(watermark)


@dataclass(frozen=True)
class Counting:
    """A count check under way: the jobs listed in [low, split] before a fresh pass from
    ``split`` began, and the watermark then."""

    low: int
    split: int
    count: int
    watermark: float

    def after(self, read: Pass, next_start: float) -> tuple[int, int, int, float]:
        """The range and count the next check compares with, once ``read`` (the fresh pass)
        has been read from ``split`` on: up to where the next fresh pass starts, the jobs
        this pass saw above ``split`` counted in (a job it did not see, listed later, makes
        the count grow). A pass cut short leaves its unread pages to its pending copy, and
        the range ends at ``split``."""
        if not read.done:
            return self.low, self.split, self.count, self.watermark
        top = max(self.split, int(next_start // 1))
        seen = sum(self.split < created <= top for created in read.seen.values())
        return self.low, top, self.count + seen, self.watermark
