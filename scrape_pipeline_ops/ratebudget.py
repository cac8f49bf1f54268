"""A token bucket that many callers share, so one process never exceeds one request rate."""

from __future__ import annotations

import threading

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock


class RateBudget:
    """``rate`` requests per second on average, bursts of up to ``burst``; ``acquire`` waits."""

    def __init__(self, rate: float, burst: float | None = None, *, clock: Clock = SYSTEM_CLOCK):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        if self.burst < 1:
            raise ValueError("burst must be at least 1")
        self._clock = clock
        self._tokens = self.burst
        self._updated = clock.monotonic()
        self._lock = threading.Lock()

    def _reserve(self) -> float:
        """Take a token, possibly on credit; return how long the caller must wait for it."""
        with self._lock:
            now = self._clock.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            self._tokens -= 1.0
            # A negative balance is a queue: each waiter pays for its own place in it.
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def acquire(self) -> float:
        """Wait until one request may be sent; return the time waited."""
        wait = self._reserve()
        if wait > 0:
            self._clock.sleep(wait)
        return wait
