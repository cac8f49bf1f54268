"""Counts of API requests by key, route and status (benchmarks divide them by jobs)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class RequestStats:
    """Thread-safe counters of ``/v1`` requests; ``/_sim`` requests are never counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()

    def record(self, key: str, route: str, status: int) -> None:
        """One request by ``key`` (or ``<missing>``/``<invalid>``) to ``route`` (``GET /v1/x``)."""
        with self._lock:
            self._counts[(key, route, status)] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, Any]:
        """Totals overall, by key, by route, by key then route, and by status."""
        with self._lock:
            items = list(self._counts.items())
        by_key: Counter[str] = Counter()
        by_route: Counter[str] = Counter()
        by_status: Counter[str] = Counter()
        by_key_route: dict[str, Counter[str]] = {}
        for (key, route, status), count in items:
            by_key[key] += count
            by_route[route] += count
            by_status[str(status)] += count
            by_key_route.setdefault(key, Counter())[route] += count
        return {
            "total": sum(by_key.values()),
            "by_key": dict(by_key),
            "by_route": dict(by_route),
            "by_status": dict(by_status),
            "by_key_route": {key: dict(routes) for key, routes in by_key_route.items()},
        }
