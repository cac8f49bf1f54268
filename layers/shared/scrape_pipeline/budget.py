"""Budgets for work done in bounded steps (the reconciler's sweeps, page by page).

A budget bounds time and, optionally, pages: ``spent(pages_read)`` is the one question a sweep
asks before each page ("out of time, or at the page cap?"). Time is measured on a
remaining-time callable (seconds left), never on a clock read here: the Lambda handler passes
``context.get_remaining_time_in_millis``, tests pass a fake that they move by hand, so a "slow"
sweep needs no real sleep. Pages are counted by the caller, which already keeps the count in
its result: the budget only holds the cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

RemainingSeconds = Callable[[], float]

# Pages one sweep may read in a run (RECONCILE_MAX_PAGES' default). Time budgets are the
# working bound; this cap only ends a run that has no deadline (the CLI, tests) or a list that
# never says it is done. 1,000 list pages are
# 100,000 jobs: far more than a run's time reads at the API's pace.
DEFAULT_MAX_PAGES = 1000


# A safety margin above this share of a whole invocation would leave it no time to work (a
# function configured with a 5 s timeout and a 10 s margin would never start anything).
MAX_MARGIN_SHARE = 0.25


def unlimited() -> float:
    """The remaining time of a run with no deadline (the CLI, tests): page caps bound it."""
    return math.inf


def safety_margin(remaining: RemainingSeconds, wanted: float) -> float:
    """The margin to keep before the deadline: ``wanted``, at most a quarter of what is left.

    Called once at the start of an invocation, while ``remaining()`` is its whole length.
    """
    return min(wanted, remaining() * MAX_MARGIN_SHARE)


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
        """True once the time is used up or ``pages_read`` (by the caller, under this budget)
        reached its page cap: stop at this page boundary."""
        if pages_read >= self._pages:
            return True
        return self._floor is not None and self._remaining() <= self._floor

    def capped(self, pages: int) -> Budget:
        """This budget's time, at most ``pages`` pages (or its own cap, if lower)."""
        return Budget(self._remaining, self.left(), pages=min(pages, self._pages))

    def share(self, weights: Sequence[float]) -> Budget:
        """A budget for the first of ``weights``' steps, out of what this one has left.

        Each step gets its weight's fraction of the time left when it starts, so time an
        earlier step did not use flows to the ones after it; the last step gets all that is
        left.
        """
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
