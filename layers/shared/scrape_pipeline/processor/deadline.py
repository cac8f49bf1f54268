"""The processor's view of its invocation's end (whether a job or a page may still start), and
one attempt at a job under its lease."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.rows import LedgerRow

RemainingSeconds = Callable[[], float]

# A page is started only if the time left covers the margin plus this many times the longest
# page seen: pages differ (a multi-MB item, a slow GET), and one killed mid-way is wasted.
PAGE_TIME_FACTOR = 1.5
# A larger margin would leave a short invocation no time (a 5 s timeout, a 10 s margin).
MAX_MARGIN_SHARE = 0.25


def safety_margin(remaining: RemainingSeconds, wanted: float) -> float:
    """``wanted``, at most a quarter of ``remaining()`` (asked at an invocation's start)."""
    return min(wanted, remaining() * MAX_MARGIN_SHARE)


@dataclass
class Deadline:
    """Seconds left, the margin kept, and the longest page so far, timed on ``remaining`` (Lambda's
    clock or a test's fake)."""

    remaining: RemainingSeconds
    margin: float
    # A page longer than any invocation could hold is still tried at the start of one
    # (never starting it would loop for ever).
    length: float = math.inf
    longest_page: float = 0.0
    _page_from: float | None = field(default=None, repr=False)

    @classmethod
    def of_invocation(cls, remaining: RemainingSeconds, stop_margin: float) -> Deadline:
        """Built at the start of an invocation, while ``remaining()`` is its whole length."""
        length = remaining()
        return cls(remaining, safety_margin(lambda: length, stop_margin), length)

    @classmethod
    def endless(cls) -> Deadline:
        """No end (a caller without one): every job and page fits, and takes no time."""
        return cls(lambda: math.inf, 0.0)

    def near(self) -> bool:
        """Too close to the end to start a job."""
        return self.remaining() < self.margin

    def room_for_page(self, expected: float = 0.0) -> bool:
        """Time for the margin plus ``PAGE_TIME_FACTOR`` times the longest page so far (or
        ``expected``, a page timed by an earlier attempt)."""
        need = self.margin + PAGE_TIME_FACTOR * max(self.longest_page, expected)
        return self.remaining() >= min(need, max(self.margin, self.length - self.margin))

    def start_page(self) -> None:
        """A page begins (its GET is next)."""
        self._page_from = self.remaining()

    def end_page(self) -> None:
        """The page begun last is stored and checkpointed."""
        if self._page_from is not None:
            # An endless deadline's page takes inf - inf (nan), which ``max`` passes over.
            self.longest_page = max(self.longest_page, self._page_from - self.remaining())
            self._page_from = None


@dataclass(frozen=True)
class Attempt:
    """The job, the lease's owner id, its row as the lease returned it, and the deadline."""

    key: JobKey
    owner: str
    row: LedgerRow
    deadline: Deadline = field(default_factory=Deadline.endless)
    # Woken by the watch sweep: a job that still runs goes back to sleep at once.
    woken: bool = False


class OutOfTimeError(PipelineError):
    """A batch or crawl stopped at a page boundary (or after an item): what comes next would not
    fit before the deadline. Its progress is checkpointed."""
