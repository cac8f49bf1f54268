"""Time as a dependency: code reads and waits through a ``Clock`` so tests never sleep."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """What the pollers and retry loops need from time: ``time`` is the wall clock (comparable
    with API timestamps), ``monotonic`` never goes backwards (deadlines)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()
_active: Clock = SYSTEM_CLOCK


def active_clock() -> Clock:
    """The clock the Lambda wiring uses: the system's, unless a local stack runs on its own."""
    return _active


def use_clock(clock: Clock | None) -> None:
    """Run the wiring on ``clock`` (local stack and tests); None restores the system clock."""
    global _active  # noqa: PLW0603 - one clock per process, set by whoever hosts the handlers
    _active = clock or SYSTEM_CLOCK
