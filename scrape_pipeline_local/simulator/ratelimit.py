"""A token bucket per API key, refilled on the simulator's clock."""

from __future__ import annotations

import math
import threading


class TokenBucketLimiter:
    """``rate`` tokens per clock second, up to ``burst``; a rate of 0 or less admits all."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = max(burst, 1)
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill time)
        self._lock = threading.Lock()

    def acquire(self, key: str, now: float) -> int:
        """Take one token: 0 when allowed, else the whole seconds to wait (at least 1)."""
        if self.rate <= 0:
            return 0
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(now - last, 0.0) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0
            self._buckets[key] = (tokens, now)
            return max(1, math.ceil((1.0 - tokens) / self.rate))

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()
