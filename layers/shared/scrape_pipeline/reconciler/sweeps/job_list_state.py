"""The job-list sweep's durable state: its passes, its checkpoint row, the count check's range
(its own module so the sweep, ``sweeps.job_list``, reads as the algorithm alone)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

# The lag's part of the checkpoint row is the listing lag's: the processor reads it without this.
from scrape_pipeline.geonode.listing_lag import LAG_MARGIN, saved_lag
from scrape_pipeline.reconciler.sweeps import SavedPass, pending_field, saved_passes

# Pending passes kept at most; beyond it the two newest are merged and read again from their
# first page (each run adds at most one: its fresh pass, cut short).
MAX_PENDING_PASSES = 16
# Parts of the count check's range kept at most (one a fresh pass between checks); beyond it the
# two oldest are merged, the lower watermark kept (a lag sample can only come out smaller).
MAX_MARKS = 16
# A run starts a few seconds early or late on its schedule (as ``CADENCE_SLACK``).
CHECK_SLACK = 5.0


class CountStep(Enum):
    """What the count check does before a fresh pass."""

    BEGIN = "begin"  # nothing counted yet: the pass's own reading is the first count
    EXTEND = "extend"  # checked less than the interval ago: the pass extends the range, no page
    RECOUNT = "recount"  # due: the range counted again (one page), then extended by the pass
    # Due with a range reaching too deep, or a gap between the range and the pass (none counts
    # it, due or not): the range counted again, then the late window counted anew (two pages).
    REBASE = "rebase"


@dataclass(eq=False)
class Pass(SavedPass):
    """A range of the job list, read newest first, as saved (``lag_from``: the watermark an
    unknown job found in a range re-read for jobs listed late was unlisted at), and more."""

    done: bool = False  # not saved: a finished pass leaves the checkpoint
    fresh: bool = False  # begun at the watermark this run: its first page moves the watermark
    seen: dict[str, float] = field(default_factory=dict)  # not saved: job id -> created_at
    # Not saved: a re-read range's parts (``Counted.marks``); resumed later, ``lag_from`` serves.
    marks: Marks = ()

    def lag_base(self, created: float) -> float | None:
        """The watermark a job created then, found here unknown, was unlisted at (None: none)."""
        return next((w for top, w in self.marks if created <= top), self.lag_from)


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
    # The count check's range [low, top] and when it was last counted (Lambda's clock).
    counted: Counted | None = None
    counted_at: float = 0.0

    @classmethod
    def read(
        cls, saved: Mapping[str, str] | None, default_watermark: float, now: float = 0.0
    ) -> Checkpoint:
        """The saved state (absent fields are 0)."""
        if not saved:
            return cls(default_watermark)
        lag, seen_at = saved_lag(saved, now)
        return cls(
            float(saved["watermark"]),
            [Pass(**vars(p)) for p in saved_passes(saved)],
            lag,
            seen_at,
            number_field(saved, "moved_at"),
            number_field(saved, "fresh_end"),
            saved.get("confirmed") == "1",
            Counted.decode(json.loads(saved["counted"])) if saved.get("counted") else None,
            number_field(saved, "counted_at"),  # none saved: the next pass checks
        )

    def overlap(self, configured: float) -> float:
        """How far below the watermark a fresh pass starts (none once confirmed)."""
        return 0.0 if self.confirmed else max(configured, LAG_MARGIN * self.lag)

    def measured(self, lag: float, now: float) -> None:
        """A page showed ``lag`` (a job listed that far below the watermark a pass had passed)."""
        if lag >= self.lag:
            self.lag, self.lag_seen_at = lag, now

    def first_page(
        self, end: float, created: Iterable[float], now: float, *, confirming: bool
    ) -> None:
        """A fresh pass up to ``end`` read its first page (the newest jobs, ``created`` then):
        the watermark moves up to them; one that stays confirms the overlap if ``confirming``."""
        newest = max(created, default=self.watermark)
        self.fresh_end = max(self.fresh_end, end)
        if newest > self.watermark:
            self.watermark, self.moved_at, self.confirmed = newest, now, False
        elif confirming:
            self.confirmed = True

    def count_step(self, now: float, split: int, every: float, deepest: float) -> CountStep:
        """The count check before a fresh pass from ``split``: one every ``every`` seconds; a
        range reaching below ``deepest``, or stopping short of ``split``, is counted anew."""
        if self.counted is None:
            return CountStep.BEGIN
        if split > self.counted.top:
            return CountStep.REBASE
        # A clock that went back (a saved time ahead of now) checks rather than wait for it.
        if 0.0 <= now - self.counted_at < every - CHECK_SLACK:
            return CountStep.EXTEND
        return CountStep.REBASE if self.counted.low < deepest else CountStep.RECOUNT

    def drop_finished(self) -> None:
        """A pass read to its end leaves the pending list."""
        self.pending = [p for p in self.pending if not p.done]

    def bound(self) -> None:
        """Merge the two newest pending passes while there are too many."""
        while len(self.pending) > MAX_PENDING_PASSES:
            older, newer = self.pending[-2], self.pending[-1]
            self.pending[-2:] = [Pass(min(older.start, newer.start), max(older.end, newer.end))]

    def fields(self) -> dict[str, str]:
        out = {"watermark": f"{self.watermark:.3f}"}
        if self.lag:
            out.update(lag=f"{self.lag:.3f}", lag_seen_at=f"{self.lag_seen_at:.3f}")
        out.update(_times_set(moved_at=self.moved_at, fresh_end=self.fresh_end))
        if self.confirmed:
            out["confirmed"] = "1"
        out.update(pending_field(self.pending))
        if self.counted is not None:
            out["counted"] = json.dumps(self.counted.encode())
        out.update(_times_set(counted_at=self.counted_at))
        return out


def _times_set(**times: float) -> dict[str, str]:
    """The times among ``times`` that are set (not 0), as fields."""
    return {name: f"{value:.3f}" for name, value in times.items() if value}


def number_field(saved: Mapping[str, str], name: str) -> float:
    """A number field of the checkpoint; absent or empty is 0."""
    return float(saved.get(name) or 0.0)


# The count check's range in parts, oldest first: each part's top and the watermark its unlisted
# jobs were unlisted at.
Marks = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Counted:
    """The count check's range [low, top] (whole seconds, empty when low > top), the jobs listed
    in it, and its parts (``Marks``): a job found late was unlisted at its part's watermark."""

    low: int
    top: int
    count: int
    marks: Marks = ()

    @classmethod
    def begin(cls, split: int) -> Counted:
        """Nothing counted yet: the fresh pass from ``split`` is the first count."""
        return cls(split, split - 1, 0)

    def after(self, read: Pass, next_start: float, floor: int, watermark: float) -> Counted:
        """This range extended by the finished fresh pass ``read`` up to ``next_start``, the
        jobs it saw counted in (an empty range starts at ``floor``); unfinished: unchanged."""
        if not read.done:
            return self
        top = max(self.top, int(next_start // 1))
        if self.low > self.top:  # nothing counted: the range is what the pass saw
            return self._first(read, max(self.low, floor), top, watermark)
        if top == self.top:
            return self
        seen = sum(self.top < created <= top for created in read.seen.values())
        marks = [*self.marks, (top, watermark)]
        while len(marks) > MAX_MARKS:
            marks[:2] = [(marks[1][0], marks[0][1])]
        return Counted(self.low, top, self.count + seen, tuple(marks))

    @staticmethod
    def _first(read: Pass, low: int, top: int, watermark: float) -> Counted:
        """The range [low, top] as the pass ``read`` saw it, its first count."""
        seen = sum(low <= created <= top for created in read.seen.values())
        return Counted(low, top, seen, ((top, watermark),))

    def recounted(self, count: int, watermark: float) -> Counted:
        """The range counted again at ``watermark``."""
        return Counted(self.low, self.top, count, ((self.top, watermark),))

    def reread(self) -> Pass:
        """The range read again (its count grew)."""
        lowest = self.marks[0][1] if self.marks else None
        return Pass(self.low, self.top, lag_from=lowest, marks=self.marks)

    def encode(self) -> list[Any]:
        """Its JSON form: ``[low, top, count, [[top, watermark], ...]]``."""
        marks = [[top, round(watermark, 3)] for top, watermark in self.marks]
        return [self.low, self.top, self.count, marks]

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> Counted:
        """From its JSON form."""
        low, top, count, marks = raw
        parts = tuple((int(t), float(w)) for t, w in marks)
        return cls(int(low), int(top), int(count), parts)
