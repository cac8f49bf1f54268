"""How late the job list may show a job, as the pipeline allows for it: one reader for all.

A POST whose answer was lost may have created a job that the job list does not show yet (the
API lists jobs minutes late at times). A look-up that finds nothing proves nothing until it is
made ``allowed()`` seconds after the POST: the larger of ``GEONODE_LISTING_LAG_FLOOR_SECONDS``
and the reconciler's measured lag times its margin (the lag its job-list sweep measures and
saves on its checkpoint row, ``sweeps.job_list_state``). Until then, the submitter, the
processor and the CLI keep the URL in doubt and never post it again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from scrape_pipeline.clock import Clock
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode_settings import LISTING_LAG_FLOOR
from scrape_pipeline.sweeps.job_list_state import JOBS_CHECKPOINT, LAG_MARGIN, Checkpoint


class CheckpointReader(Protocol):
    """Reads checkpoint rows in one BatchGetItem (``ledger.Bookkeeping.read_many``)."""

    def read_many(self, names: Sequence[str]) -> dict[str, dict[str, str]]: ...


class ListingCatchingUpError(PipelineError):
    """A POST may have created a job the job list does not show yet: look again at ``until``."""

    def __init__(self, posted_at: float, until: float, lag: float) -> None:
        super().__init__(f"posted at {posted_at:.0f}: maybe not listed until {until:.0f}")
        self.posted_at, self.until, self.lag = posted_at, until, lag

    def retry_in(self, now: float) -> int:
        """Whole seconds from ``now`` until a look-up proves something (at least one)."""
        return max(1, math.ceil(self.until - now))


class ListingLag:
    """The listing lag allowed for now; without ``books`` (a CLI with no stack), the floor."""

    def __init__(
        self, books: CheckpointReader | None, *, clock: Clock, floor_s: float | None = None
    ) -> None:
        self._books = books
        self._clock = clock
        self.floor_s = LISTING_LAG_FLOOR.default if floor_s is None else floor_s

    def allowed(self) -> float:
        """max(floor, measured lag times ``LAG_MARGIN``), the lag read from the reconciler's row
        (forgotten a day after it was last seen, as the reconciler forgets it)."""
        if self._books is None:
            return self.floor_s
        now = self._clock.time()
        saved = self._books.read_many([JOBS_CHECKPOINT]).get(JOBS_CHECKPOINT)
        measured = Checkpoint.read(saved, now, now).lag if saved else 0.0
        return max(self.floor_s, LAG_MARGIN * measured)

    def check(self, posted_at: float | None) -> None:
        """Raise ``ListingCatchingUpError`` while a POST begun at ``posted_at`` may still be
        missing from the job list (None: no POST noted, nothing to wait for)."""
        if posted_at is None:
            return
        lag = self.allowed()
        if self._clock.time() < posted_at + lag:
            raise ListingCatchingUpError(posted_at, posted_at + lag, lag)


__all__: Sequence[str] = ("CheckpointReader", "ListingCatchingUpError", "ListingLag")
