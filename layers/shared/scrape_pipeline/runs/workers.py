"""The submitter's workers: threads that claim a run's entries in order, as many in flight as
the pace allows, and stop together; and the owner token each submitter claims with."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from scrape_pipeline.runs.journal import Entry


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
