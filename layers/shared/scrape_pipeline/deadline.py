"""The processor's view of its invocation's end: whether a job or a page may still start.

No job is started within the stop margin of the deadline, and no page of a batch or crawl
(its GET and its S3 writes) unless the time left also covers ``PAGE_TIME_FACTOR`` times the
longest page timed so far.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from scrape_pipeline.budget import safety_margin

# A page is started only if the time left covers the margin plus this many times the longest
# page seen: pages differ (a multi-MB item, a slow GET), and one killed mid-way is wasted.
PAGE_TIME_FACTOR = 1.5


@dataclass
class Deadline:
    """The end of the invocation as the processor sees it: seconds left, the margin kept, and
    the pages timed so far.

    Pages are timed on ``remaining`` itself (the time left before and after), so a page's
    measure and the deadline share one clock: Lambda's, or a test's fake.
    """

    remaining: Callable[[], float]
    margin: float
    # The invocation's whole length: a page longer than any invocation could hold is still
    # tried at the start of one (never starting it would loop for ever).
    length: float = math.inf
    longest_page: float = 0.0
    _page_from: float | None = field(default=None, repr=False)

    @classmethod
    def of_invocation(cls, remaining: Callable[[], float], stop_margin: float) -> Deadline:
        """Built once at the start of an invocation, while ``remaining()`` is its whole length."""
        length = remaining()
        return cls(remaining, safety_margin(lambda: length, stop_margin), length)

    def near(self) -> bool:
        """Too close to the end to start a job."""
        return self.remaining() < self.margin

    def room_for_page(self, expected: float = 0.0) -> bool:
        """Time enough for one more page: the margin plus ``PAGE_TIME_FACTOR`` times the
        longest page so far (or ``expected``, a page timed by an earlier attempt)."""
        need = self.margin + PAGE_TIME_FACTOR * max(self.longest_page, expected)
        return self.remaining() >= min(need, max(self.margin, self.length - self.margin))

    def start_page(self) -> None:
        """A page begins (its GET is next)."""
        self._page_from = self.remaining()

    def end_page(self) -> None:
        """The page begun last is stored and checkpointed: its time counts from now on."""
        if self._page_from is not None:
            self.longest_page = max(self.longest_page, self._page_from - self.remaining())
            self._page_from = None
