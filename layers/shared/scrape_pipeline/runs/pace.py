"""The submitter's pace: one send rate shared by its workers, found by AIMD against the API
(slow start, halved on a 429 whose ``Retry-After`` pauses every worker); the workers: threads
that claim a run's entries in order, as many in flight as the pace allows, and stop together;
and the owner token each submitter claims with."""

from __future__ import annotations

import math
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from scrape_pipeline.clock import Clock

if TYPE_CHECKING:
    from scrape_pipeline.runs.journal import Entry


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
            if sent_at > self._cut_at:  # sent after the last cut: news of this rate
                self._slow_start = False
                self._peak = self._rate
                self._rate = max(self.settings.min_rate, self._rate * self.settings.decrease)
                self._cut_at = now
            self._paused_until = max(self._paused_until, now + max(pause_s, 0.0))
            self._next = max(self._next, self._paused_until)


class _OutOfTimeError(Exception):
    """A wait would end past the caller's time: the call ends, with nothing held."""


class PostingPool:
    """Hands ``entries`` out to workers that ``post`` them, at most ``concurrency()`` at once,
    until ``stopped`` or ``out_of_time`` (read under the submitter's ``lock``); a worker's crash
    stops the others and is raised in the calling thread."""

    def __init__(
        self,
        entries: Iterable[Entry],
        *,
        post: Callable[[Entry], None],
        concurrency: Callable[[], int],
        stopped: Callable[[], bool],
        out_of_time: Callable[[], bool],
        lock: threading.RLock,
    ) -> None:
        self._todo = iter(entries)
        self._post = post
        self._concurrency = concurrency
        self._stopped = stopped
        self._out_of_time = out_of_time
        self._lock = lock
        self._gate = threading.Condition()  # at most concurrency() entries in flight
        self._in_flight = 0
        self._halt = threading.Event()
        self._cut = threading.Event()
        self._crashes: list[BaseException] = []

    def run(self, workers: int, on_interrupt: Callable[[], None]) -> bool:
        """Post every entry with ``workers`` threads; True when the caller's time ended it.
        Anything raised here halts them, and Ctrl-C hands what is in flight to ``on_interrupt``."""
        threads = [
            threading.Thread(target=self._worker, name=f"submit-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException as exc:
            self._halt.set()
            if isinstance(exc, KeyboardInterrupt):
                on_interrupt()
            raise
        if self._crashes:
            raise self._crashes[0]
        return self._cut.is_set()

    def _next(self) -> Entry | None:
        with self._gate:
            while self._in_flight >= self._concurrency() and not self._halt.is_set():
                self._gate.wait()
            with self._lock:
                entry = next(self._todo, None) if self._may_claim() else None
            if entry is not None:
                self._in_flight += 1
            return entry

    def _may_claim(self) -> bool:
        """Nothing halted or stopped the run, and the caller's time is not spent."""
        if self._halt.is_set() or self._stopped():
            return False
        if self._out_of_time():
            self._cut.set()
            return False
        return True

    def _done(self) -> None:
        with self._gate:
            self._in_flight -= 1
            self._gate.notify_all()

    def _worker(self) -> None:
        try:
            while (entry := self._next()) is not None:
                try:
                    self._post(entry)
                finally:
                    self._done()
        except _OutOfTimeError:
            self._cut.set()  # what the others hold is answered; nothing more is claimed
            self._halt_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self._crashes.append(exc)
            self._halt_all()

    def _halt_all(self) -> None:
        self._halt.set()
        with self._gate:
            self._gate.notify_all()


def new_owner() -> str:
    """A submitter's token: host, process and a random part (a restarted pid is not reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_gone(owner: str | None) -> TypeGuard[str]:
    """``owner`` (a ``new_owner`` token) names a process of this host no longer alive (a pid
    reused since reads as alive: the lease is waited out)."""
    pid = _pid_of_this_host(owner)
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, under another user
    return False


def _pid_of_this_host(owner: str | None) -> int | None:
    """The pid a token names when it names this host, else None."""
    host, _, rest = (owner or "").rpartition(":")[0].rpartition(":")
    if host != socket.gethostname() or not rest.isdigit():
        return None
    return int(rest)
