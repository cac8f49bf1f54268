"""A submission run's progress on stderr: a rich bar on a terminal (the ``cli`` extra), else
one line every few seconds (``posted 1200/20000 URLs, 48.1/s, 3 429s, 1 in doubt``).

``Progress`` is the submitter's listener: it counts each entry's news and hands the event on
to the next listener (the result lines). Events come from the submitter's workers, so the
counts are kept under a lock. The clock is injected: the line mode is tested without waiting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from scrape_pipeline.clock import Clock
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import RunMode
from scrape_pipeline.runs.report import Event, EventKind, Planned

LINE_EVERY_S = 5.0
_POSTED = (EventKind.SUBMITTED, EventKind.ADOPTED)


def _bar_console(stream: TextIO) -> Any:
    """A rich Console on ``stream`` when it is a terminal and rich is installed, else None."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return None
    try:
        from rich.console import Console  # noqa: PLC0415 - the `cli` extra, terminals only
    except ImportError:
        return None
    return Console(file=stream, highlight=False)


class Progress:
    """Counts a run's news for the person watching, and passes each event on to ``then``."""

    def __init__(
        self,
        stream: TextIO,
        clock: Clock,
        *,
        then: Callable[[Event], None] | None = None,
        every_s: float = LINE_EVERY_S,
        bar: bool = True,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.every_s = every_s
        self._then = then or (lambda event: None)
        self._console = _bar_console(stream) if bar else None
        self._lock = threading.Lock()
        self._throttled: Callable[[], int] = lambda: 0
        self._total = 0
        self._unit = "URLs"
        self._posted = 0  # entries submitted, before this call and during it
        self._posted_now = 0
        self._doubts: set[int] = set()
        self._started = 0.0
        self._last_line = 0.0
        self._shown = False
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, event: Event) -> None:
        with self._lock:
            index = event.entry.index
            if event.kind in _POSTED:
                self._posted += 1
                self._posted_now += 1
                self._doubts.discard(index)
            elif event.kind is EventKind.IN_DOUBT:
                self._doubts.add(index)
            elif event.kind is EventKind.REJECTED:
                self._doubts.discard(index)
            if self._shown:
                self._show(final=False)
        self._then(event)

    @contextmanager
    def shown(self, planned: Planned, throttled: Callable[[], int]) -> Iterator[None]:
        """Show the run's progress while the block works it; ``throttled()`` counts its 429s."""
        run = planned.run
        with self._lock:
            self._total = run.entries
            self._unit = "batches" if run.mode is RunMode.BATCH else "URLs"
            self._posted = planned.resumed.get(EntryState.SUBMITTED, 0)
            self._throttled = throttled
            self._started = self._last_line = self.clock.time()
            self._shown = True
            if self._console is not None:
                self._start_bar()
        try:
            yield
        finally:
            with self._lock:
                self._show(final=True)
                self._shown = False
                if self._bar is not None:
                    self._bar.stop()

    def line(self) -> str:
        """``posted 1200/20000 URLs, 48.1/s, 3 429s, 1 in doubt``: where the run stands."""
        elapsed = self.clock.time() - self._started
        rate = self._posted_now / elapsed if elapsed > 0 else 0.0
        return (
            f"posted {self._posted}/{self._total} {self._unit}, {rate:.1f}/s, "
            f"{self._throttled()} 429s, {len(self._doubts)} in doubt"
        )

    def _show(self, *, final: bool) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self._posted, description=self.line())
            return
        now = self.clock.time()
        # The last line only after a run long enough to have lines: a short one says nothing.
        last = final and now - self._started >= self.every_s
        if last or now - self._last_line >= self.every_s:
            self._last_line = now
            self.stream.write(f"scrape-pipeline: {self.line()}\n")
            self.stream.flush()

    def _start_bar(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn  # noqa: PLC0415

        columns = (BarColumn(), TextColumn("{task.description}"))
        self._bar = Progress(*columns, console=self._console, transient=False)
        self._task = self._bar.add_task(self.line(), total=self._total, completed=self._posted)
        self._bar.start()


__all__: Sequence[str] = ("LINE_EVERY_S", "Progress")
