"""Injected faults: lost, duplicated, delayed and reordered webhooks, API error bursts, poison
jobs whose every GET answers 200 with a malformed body, sick jobs whose own GET fails (404,
a 5xx, or no answer at all) for a while as every other job's succeeds, and lost answers: a
request carried out (the job created) whose answer never reaches the client."""

from __future__ import annotations

import hashlib
import random
import threading
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from scrape_pipeline_local.simulator.clocks import Clock
from scrape_pipeline_local.simulator.config import FaultSettings
from scrape_pipeline_local.simulator.seeding import rng_for

API_FAULT_STATUSES = frozenset({429, 500, 502, 503, 504})
_RATES = ("drop_rate", "duplicate_rate", "api_error_rate", "malformed_rate")
# The field a malformed answer leaves out: every client needs it to know which job it read.
MALFORMED_FIELD = "job_id"
# What a sick job's own route answers: a status, or "timeout" (the connection is dropped
# without an answer, as a gateway that gave up looks to the client).
JobAnswer = int | Literal["timeout"]
JOB_FAULT_STATUSES = frozenset({404, 500, 502, 503, 504})
# The routes whose answers ``lose_answers_at`` loses at random: those that create jobs.
LOSABLE_ROUTES = frozenset({"POST /v1/extract", "POST /v1/batch"})


@dataclass(frozen=True)
class LostAnswer:
    """One request carried out whose answer the client never saw: when, where, what it made.

    ``first_post``: the request was the first submission of each of its URLs (not a retry)."""

    at: float
    route: str
    job_id: str | None
    urls: tuple[str, ...]
    first_post: bool


@dataclass(frozen=True)
class JobFault:
    """One job's fault: every request to its own route answers ``answer`` until ``until``."""

    answer: JobAnswer
    until: float


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
            self._burst_route: str | None = None
            self._rng = random.Random(rng_for(self._seed, "api-faults").getrandbits(64))
            self._malformed: set[str] = set()
            self._sick: dict[str, JobFault] = {}
            self._lost: dict[str, list[JobAnswer]] = {}  # route -> answers still to lose
            self._lose_rate = 0.0  # share of LOSABLE_ROUTES requests whose answer is lost
            self._lose_with: tuple[JobAnswer, ...] = (504, "timeout")
            self._lost_log: list[LostAnswer] = []

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
        self,
        *,
        count: int | None = None,
        duration_s: float | None = None,
        status: int = 503,
        route: str | None = None,
    ) -> None:
        """Answer the next ``count`` API requests, or all within ``duration_s``, with ``status``.

        ``route`` (a label such as ``POST /v1/extract``) narrows the burst to that route.
        """
        if status not in API_FAULT_STATUSES:
            raise ValueError(f"status must be one of {sorted(API_FAULT_STATUSES)}")
        if count is None and duration_s is None:
            raise ValueError("give count, duration_s or both")
        with self._lock:
            self._burst_status = status
            self._burst_route = route
            self._burst_left = max(count or 0, 0)
            self._burst_until = None if duration_s is None else self._clock.time() + duration_s

    def malform(self, job_id: str) -> None:
        """Make every GET of ``job_id`` (extract, batch or crawl) answer a malformed body."""
        with self._lock:
            self._malformed.add(job_id)

    def fail_job(self, job_id: str, *, answer: JobAnswer, duration_s: float) -> None:
        """Make the requests to ``job_id``'s own route (GET extract, batch or crawl) answer
        ``answer`` for ``duration_s`` from now, while every other job is answered as usual."""
        if answer != "timeout" and answer not in JOB_FAULT_STATUSES:
            raise ValueError(f"answer must be 'timeout' or one of {sorted(JOB_FAULT_STATUSES)}")
        if duration_s <= 0:
            raise ValueError("duration_s must be positive")
        with self._lock:
            self._sick[job_id] = JobFault(answer, self._clock.time() + duration_s)

    def lose_answers(self, route: str, answers: list[JobAnswer]) -> None:
        """Carry out the next ``len(answers)`` requests to ``route`` (``POST /v1/extract``),
        then answer each with its entry instead (a 5xx, or "timeout": no answer at all), as a
        gateway does that fails after the API acted."""
        for answer in answers:
            if answer != "timeout" and answer not in API_FAULT_STATUSES - {429}:
                raise ValueError("a lost answer is 'timeout' or a 5xx status")
        with self._lock:
            self._lost.setdefault(route, []).extend(answers)

    def lose_answers_at(
        self, rate: float, answers: tuple[JobAnswer, ...] = (504, "timeout")
    ) -> None:
        """From now on carry out ``rate`` of the job-creating POSTs (``LOSABLE_ROUTES``), then
        answer each with one of ``answers`` drawn at random; a rate of 0 stops it. Concurrent
        posters need this: arming the next request (``lose_answers``) cannot aim at one."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be within [0, 1]")
        for answer in answers:
            if answer != "timeout" and answer not in API_FAULT_STATUSES - {429}:
                raise ValueError("a lost answer is 'timeout' or a 5xx status")
        with self._lock:
            self._lose_rate, self._lose_with = rate, tuple(answers)

    def lost_answer(self, route: str) -> JobAnswer | None:
        """The answer that replaces this request's own, when its answer is to be lost."""
        with self._lock:
            pending = self._lost.get(route)
            if pending:
                return pending.pop(0)
            if route in LOSABLE_ROUTES and self._lose_rate and self._rng.random() < self._lose_rate:
                return self._rng.choice(self._lose_with)
            return None

    def note_lost(self, lost: LostAnswer) -> None:
        """Record a request carried out whose answer was lost (the gateway calls it)."""
        with self._lock:
            self._lost_log.append(lost)

    def lost_answers(self) -> list[LostAnswer]:
        """Every answer lost so far, in the order the requests were carried out."""
        with self._lock:
            return list(self._lost_log)

    def job_fault(self, job_id: str) -> JobFault | None:
        """The fault ``job_id``'s own route answers with now, or None (healthy, or recovered)."""
        with self._lock:
            fault = self._sick.get(job_id)
        if fault is None or self._clock.time() >= fault.until:
            return None
        return fault

    def sick_jobs(self) -> dict[str, JobFault]:
        """Every job given a fault by ``fail_job``, recovered or not."""
        with self._lock:
            return dict(self._sick)

    def is_malformed(self, job_id: str) -> bool:
        """Whether GETs of ``job_id`` answer malformed: named, or drawn at ``malformed_rate``.

        The draw hashes the seed and the id, so a job is poison on every call or on none.
        """
        with self._lock:
            if job_id in self._malformed:
                return True
            rate = self._settings.malformed_rate
        if rate <= 0:
            return False
        digest = hashlib.sha256(f"{self._seed}:malformed:{job_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < rate

    def malformed(self, body: dict[str, Any], job_id: str) -> dict[str, Any]:
        """``body`` as a poison job's GET answers it (unchanged for healthy jobs)."""
        if not self.is_malformed(job_id):
            return body
        return {k: v for k, v in body.items() if k != MALFORMED_FIELD}

    def paged(self, body: dict[str, Any]) -> dict[str, Any]:
        """A batch's or crawl's page as the API answers it: without ``page`` under ``omit_page``."""
        if not self._settings.omit_page:
            return body
        return {k: v for k, v in body.items() if k != "page"}

    def api_fault(self, route: str | None = None) -> int | None:
        """The status an API request to ``route`` must answer with because of a fault, or None."""
        with self._lock:
            aimed = self._burst_route is None or route == self._burst_route
            if aimed and self._burst_left > 0:
                self._burst_left -= 1
                return self._burst_status
            if aimed and self._burst_until is not None:
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
