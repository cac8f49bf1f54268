"""How late the job list may show a job: the floor or the reconciler's measured lag times its
margin; until then a look-up that finds nothing proves nothing (the URL stays in doubt)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from scrape_pipeline.clock import Clock
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.settings import LISTING_LAG_FLOOR

if TYPE_CHECKING:
    from scrape_pipeline.ledger.bookkeeping import Bookkeeping

# The job-list sweep's checkpoint row (``meta#`` + this), where it saves the lag it measured.
JOBS_CHECKPOINT = "reconciler-jobs"
# A lag measured is a lower bound (a job listed later still was not seen at all): allow this many.
LAG_MARGIN = 2.0
# A measured lag is remembered this long after it was last seen (Lambda's clock).
LAG_MEMORY_SECONDS = 86_400.0


def saved_lag(saved: Mapping[str, str], now: float) -> tuple[float, float]:
    """The lag the checkpoint row holds (0 once not seen for a day) and when it was seen."""
    lag, seen_at = _number(saved, "lag"), _number(saved, "lag_seen_at")
    return (0.0 if now - seen_at > LAG_MEMORY_SECONDS else lag), seen_at


def _number(saved: Mapping[str, str], name: str) -> float:
    return float(saved.get(name) or 0.0)  # absent (rows of earlier versions) or empty: 0


class ListingCatchingUpError(PipelineError):
    """A POST may have created a job the job list does not show yet: look again at ``until``."""

    def __init__(self, posted_at: float, until: float) -> None:
        super().__init__(f"posted at {posted_at:.0f}: maybe not listed until {until:.0f}")
        self.until = until

    def retry_in(self, now: float) -> int:
        """Whole seconds from ``now`` until a look-up proves something (at least one)."""
        return max(1, math.ceil(self.until - now))


class ListingLag:
    """The listing lag allowed for now; without ``books`` (a CLI with no stack), the floor."""

    def __init__(
        self,
        books: Bookkeeping | None,
        *,
        clock: Clock,
        floor_s: float = LISTING_LAG_FLOOR.default,
    ) -> None:
        self._books = books
        self._clock = clock
        self.floor_s = floor_s

    def allowed(self) -> float:
        """max(floor, ``LAG_MARGIN`` times the lag the reconciler's row holds)."""
        if self._books is None:
            return self.floor_s
        saved = self._books.read_many([JOBS_CHECKPOINT]).get(JOBS_CHECKPOINT, {})
        measured = saved_lag(saved, self._clock.time())[0]
        return max(self.floor_s, LAG_MARGIN * measured)

    def check(self, posted_at: float | None) -> None:
        """Raise ``ListingCatchingUpError`` while a POST begun at ``posted_at`` (None: none)
        may still be missing from the job list."""
        if posted_at is None:
            return
        lag = self.allowed()
        if self._clock.time() < posted_at + lag:
            raise ListingCatchingUpError(posted_at, posted_at + lag)
