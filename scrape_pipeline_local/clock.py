"""Clocks for tests and benchmarks: a manual one that never waits, a scaled one that runs fast."""

from __future__ import annotations

import threading
import time


class ManualClock:
    """A clock that moves only when told: ``sleep`` advances it instantly (unit tests)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.time()

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(seconds, 0.0))

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        with self._lock:
            self._now += seconds


class ScaledClock:
    """Real time sped up ``scale`` times, so a 20 s job takes 20/scale real seconds (benchmarks).

    Two processes built with the same ``real_origin`` and ``sim_origin`` agree on the time.
    """

    def __init__(
        self,
        scale: float = 1.0,
        *,
        real_origin: float | None = None,
        sim_origin: float | None = None,
    ) -> None:
        if scale <= 0:
            raise ValueError("scale must be positive")
        self.scale = scale
        self.real_origin = time.time() if real_origin is None else real_origin
        self.sim_origin = self.real_origin if sim_origin is None else sim_origin

    def time(self) -> float:
        return self.sim_origin + (time.time() - self.real_origin) * self.scale

    def monotonic(self) -> float:
        return self.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.scale)
