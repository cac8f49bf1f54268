"""Counts of API requests by key, route and status, and by job for the routes that read one job
(benchmarks divide them by jobs; tests bound the GETs of one job)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class RequestStats:
    """Thread-safe counters of ``/v1`` requests; ``/_sim`` requests are never counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()
        self._by_job: Counter[tuple[str, str]] = Counter()

    def record(self, key: str, route: str, status: int, job_id: str | None = None) -> None:
        """One request by ``key`` (or ``<missing>``/``<invalid>``) to ``route`` (``GET /v1/x``),
        about ``job_id`` when the route reads one job."""
        with self._lock:
            self._counts[(key, route, status)] += 1
            if job_id is not None:
                self._by_job[(job_id, route)] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._by_job.clear()

    def snapshot(self) -> dict[str, Any]:
        """Totals overall, by key, by route, by key then route, by status, and by job."""
        with self._lock:
            items = list(self._counts.items())
            per_job = list(self._by_job.items())
        by_job: dict[str, dict[str, int]] = {}
        for (job_id, route), count in per_job:
            by_job.setdefault(job_id, {})[route] = count
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
            "by_job": by_job,
        }
