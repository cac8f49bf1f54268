"""What the simulator needs from a clock: any object with ``time() -> float`` (epoch seconds)."""

from __future__ import annotations

from typing import Protocol

from scrape_pipeline_local.clock import ScaledClock


class Clock(Protocol):
    """Epoch seconds; ``clock.ManualClock`` in tests, ``clock.ScaledClock`` to run fast."""

    def time(self) -> float: ...


def real_clock() -> Clock:
    """Wall time, advancing monotonically (a ScaledClock at scale 1)."""
    return ScaledClock(1.0)


class OffsetClock:
    """``inner``'s time shifted by ``offset`` seconds: an API whose clock is ahead or behind."""

    def __init__(self, inner: Clock, offset: float) -> None:
        self.inner = inner
        self.offset = offset

    def time(self) -> float:
        return self.inner.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the inner clock (a ManualClock's ``advance``), if it can be moved."""
        self.inner.advance(seconds)  # type: ignore[attr-defined]
