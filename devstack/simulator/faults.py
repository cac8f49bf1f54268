"""Injected faults: lost, duplicated, delayed and reordered webhooks, and API error bursts."""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, fields
from typing import Any

from devstack.simulator.clocks import Clock
from devstack.simulator.config import FaultSettings
from devstack.simulator.seeding import rng_for

API_FAULT_STATUSES = frozenset({429, 500, 502, 503, 504})
_RATES = ("drop_rate", "duplicate_rate", "api_error_rate")


class Faults:
    """Current fault levels. Every method is thread-safe; draws are seeded from the config seed."""

    def __init__(self, settings: FaultSettings, seed: int, clock: Clock) -> None:
        self._initial = settings
        self._seed = seed
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Back to the configured levels, with no burst pending."""
        with self._lock:
            self._settings = self._initial
            self._burst_left = 0
            self._burst_until: float | None = None
            self._burst_status = 503
            self._rng = random.Random(rng_for(self._seed, "api-faults").getrandbits(64))

    def clear(self) -> None:
        """No fault at all, whatever the configuration said."""
        with self._lock:
            self._settings = FaultSettings()
            self._burst_left = 0
            self._burst_until = None

    @property
    def settings(self) -> FaultSettings:
        return self._settings

    def update(self, **changes: float | int) -> FaultSettings:
        """Change some levels, e.g. ``update(drop_rate=0.1, reorder_window_s=5)``."""
        known = {f.name for f in fields(FaultSettings)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown fault settings: {sorted(unknown)}")
        merged = {**asdict(self._settings), **changes}
        for name in _RATES:
            if not 0.0 <= float(merged[name]) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if not 0.0 <= float(merged["delay_min_s"]) <= float(merged["delay_max_s"]):
            raise ValueError("need 0 <= delay_min_s <= delay_max_s")
        if float(merged["reorder_window_s"]) < 0:
            raise ValueError("reorder_window_s must not be negative")
        if int(merged["api_error_status"]) not in API_FAULT_STATUSES:
            raise ValueError(f"api_error_status must be one of {sorted(API_FAULT_STATUSES)}")
        with self._lock:
            self._settings = FaultSettings(**merged)
        return self._settings

    def burst(
        self, *, count: int | None = None, duration_s: float | None = None, status: int = 503
    ) -> None:
        """Answer the next ``count`` API requests, or all within ``duration_s``, with ``status``."""
        if status not in API_FAULT_STATUSES:
            raise ValueError(f"status must be one of {sorted(API_FAULT_STATUSES)}")
        if count is None and duration_s is None:
            raise ValueError("give count, duration_s or both")
        with self._lock:
            self._burst_status = status
            self._burst_left = max(count or 0, 0)
            self._burst_until = None if duration_s is None else self._clock.time() + duration_s

    def api_fault(self) -> int | None:
        """The status an API request must answer with because of a fault, or None."""
        with self._lock:
            if self._burst_left > 0:
                self._burst_left -= 1
                return self._burst_status
            if self._burst_until is not None:
                if self._clock.time() < self._burst_until:
                    return self._burst_status
                self._burst_until = None
            rate = self._settings.api_error_rate
            if rate > 0 and self._rng.random() < rate:
                return self._settings.api_error_status
        return None

    def snapshot(self) -> dict[str, Any]:
        """Current levels and burst state, as JSON."""
        with self._lock:
            return {
                **asdict(self._settings),
                "burst_remaining": self._burst_left,
                "burst_until": self._burst_until,
                "burst_status": self._burst_status,
            }
