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
