"""Budgets for work done in bounded steps (the reconciler's sweeps, page by page), measured on
a remaining-time callable, never on a clock read here, so tests move time by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scrape_pipeline.processor.deadline import RemainingSeconds, safety_margin

__all__ = ["DEFAULT_MAX_PAGES", "Budget", "RemainingSeconds", "safety_margin", "unlimited"]

# Pages one sweep may read in a run (RECONCILE_MAX_PAGES' default): time is the working bound;
# this only ends a run with no deadline (the CLI, tests). 1,000 pages are 100,000 jobs.
DEFAULT_MAX_PAGES = 1000


def unlimited() -> float:
    """The remaining time of a run with no deadline (the CLI, tests): page caps bound it."""
    return math.inf


class Budget:
    """A share of a run's time, spent once ``seconds`` have gone by on the remaining time, or
    once ``pages`` pages have been read under it."""

    def __init__(
        self, remaining: RemainingSeconds, seconds: float, *, pages: float = math.inf
    ) -> None:
        self._remaining = remaining
        self._pages = pages
        left = remaining()
        # With no deadline there is no floor: the budget is never spent.
        self._floor = None if math.isinf(left) else left - max(seconds, 0.0)

    def spent(self, pages_read: int = 0) -> bool:
        """The time is used up or ``pages_read`` reached the page cap: stop at this page."""
        if pages_read >= self._pages:
            return True
        return self._floor is not None and self._remaining() <= self._floor

    def capped(self, pages: int) -> Budget:
        """This budget's time, at most ``pages`` pages (or its own cap, if lower)."""
        return Budget(self._remaining, self.left(), pages=min(pages, self._pages))

    def share(self, weights: Sequence[float]) -> Budget:
        """A budget for the first of ``weights``' steps, out of what is left: time a step did
        not use flows to the ones after it; the last gets all that is left."""
        total = sum(weights)
        left = self.left()
        seconds = left if total <= 0 or math.isinf(left) else left * weights[0] / total
        # The page cap is the caller's count, shared: the steps read against one cap.
        return Budget(self._remaining, seconds, pages=self._pages)

    @classmethod
    def no_deadline(cls) -> Budget:
        """A budget that is never spent: only page caps bound the work."""
        return cls(unlimited, 0.0)

    def left(self) -> float:
        """Seconds of this budget still unspent (``inf`` without a deadline)."""
        if self._floor is None:
            return math.inf
        return max(0.0, self._remaining() - self._floor)
