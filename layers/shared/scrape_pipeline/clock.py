"""Time as a dependency: code reads and waits through a ``Clock`` so tests never sleep."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """What the pollers and retry loops need from time."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (comparable with API timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never go backwards (deadlines)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


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
