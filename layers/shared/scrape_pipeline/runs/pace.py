"""The submitter's pace: one send rate shared by its workers, found by AIMD against the API
(slow start, halved on a 429 whose ``Retry-After`` pauses every worker)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from scrape_pipeline.clock import Clock


@dataclass(frozen=True)
class PaceSettings:
    """The controller's knobs; ``workers`` is the most POSTs ever in flight at once."""

    workers: int = 8
    # In flight: enough to keep the rate with answers this many times slower than now.
    headroom: float = 2.0
    start_rate: float = 20.0  # sends per second before any answer
    min_rate: float = 0.5
    max_rate: float = 2000.0
    # After slow start, growth per second of clean answers: this share of the rate cut from.
    increase: float = 0.04
    decrease: float = 0.5  # the rate is multiplied by this on a 429
    slow_s: float = 5.0  # an answer slower than this is not "fast": the rate does not grow

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if not 0 < self.min_rate <= self.start_rate <= self.max_rate:
            raise ValueError("rates must satisfy 0 < min_rate <= start_rate <= max_rate")
        if not 0 < self.decrease < 1 or self.increase <= 0:
            raise ValueError("decrease must be in (0, 1) and increase positive")


class Pace:
    """Send slots for the submitter's workers at the AIMD rate; thread-safe."""

    def __init__(
        self,
        clock: Clock,
        settings: PaceSettings = PaceSettings(),
    ) -> None:
        self.clock = clock
        self.settings = settings
        self._lock = threading.Lock()
        self._rate = self.settings.start_rate
        self._slow_start = True
        self._peak = self.settings.start_rate  # the rate at the last cut
        self._next = clock.time()  # the earliest next send slot
        self._paused_until = 0.0
        self._cut_at = float("-inf")  # when the rate was last cut
        self._lagging = False  # the workers come late for their slots: the rate is not the limit
        self._latency = 0.0  # seconds from send to answer, a moving average
        self.throttles = 0  # 429s (and other not-acted answers) reported
        self.cuts = 0

    @property
    def rate(self) -> float:
        """The current send rate, per second."""
        with self._lock:
            return self._rate

    def concurrency(self) -> int:
        """How many POSTs may be in flight: what the rate needs at the answers' latency (one
        while no answer took time: a manual clock keeps a run's order)."""
        with self._lock:
            needed = math.ceil(self._rate * self._latency * self.settings.headroom)
        return max(1, min(self.settings.workers, needed))

    def paused_until(self) -> float:
        """When the pause a 429 asked for ends (in the past: no pause)."""
        with self._lock:
            return self._paused_until

    def turn(self) -> float:
        """Wait for this worker's send slot and return its time (the request's ``sent_at``)."""
        slot = self.turn_before(math.inf)
        assert slot is not None  # no slot is later than for ever
        return slot

    def turn_before(self, latest: float) -> float | None:
        """``turn``, or None at once with no slot taken when the next slot is after ``latest``."""
        while True:
            with self._lock:
                now = self.clock.time()
                slot = max(now, self._next, self._paused_until)
                if slot > latest:
                    return None
                self._lagging = now > self._next + 1.0 / self._rate
                self._next = slot + 1.0 / self._rate
            if slot > now:
                self.clock.sleep(slot - now)
            with self._lock:
                if self._paused_until <= slot:
                    return slot
            # A 429 paused everyone while this worker waited: take a slot after the pause.

    def answered(self, sent_at: float) -> None:
        """A clean answer to the request sent at ``sent_at``: the rate grows if it was fast."""
        with self._lock:
            took = max(self.clock.time() - sent_at, 0.0)
            self._latency += 0.2 * (took - self._latency)
            fast = took <= self.settings.slow_s
            if not fast or self._lagging:
                return  # growing a rate nobody reaches would only make the next cut too small
            if self._slow_start:
                self._rate += 1.0  # one per answer: doubles each second
            else:
                self._rate += self.settings.increase * self._peak / self._rate
            self._rate = min(self._rate, self.settings.max_rate)

    def throttled(self, sent_at: float, pause_s: float) -> None:
        """The request sent at ``sent_at`` was not acted on (429): cut once, pause everyone."""
        with self._lock:
            now = self.clock.time()
            self.throttles += 1
            if sent_at > self._cut_at:  # sent after the last cut: news of this rate
                self._slow_start = False
                self._peak = self._rate
                self._rate = max(self.settings.min_rate, self._rate * self.settings.decrease)
                self._cut_at = now
                self.cuts += 1
            self._paused_until = max(self._paused_until, now + max(pause_s, 0.0))
            self._next = max(self._next, self._paused_until)
