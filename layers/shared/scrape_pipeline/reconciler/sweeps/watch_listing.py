"""The watch sweep's listing of the unsettled jobs, as saved between runs: the listing under way
(its ids a page at a time in chunk rows, so a page costs one small write) and the last complete."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scrape_pipeline.geonode.client import JOBS_PAGE_MAX
from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.geonode.models import ApiStatus, JobSummary, Page
from scrape_pipeline.reconciler.sweeps import ends

if TYPE_CHECKING:
    from scrape_pipeline.ledger.rows import LedgerRow

# The rows' resume point and the listing under way (its ``list_`` fields), one row.
WATCH_CHECKPOINT = "reconciler-watch"
# The last complete listing that took more than one run (one read within a run needs none).
LISTED_CHECKPOINT = "reconciler-watch-listed"
UNSETTLED_STATUSES = (ApiStatus.QUEUED, ApiStatus.PROCESSING)
DIGEST_BYTES = 8  # per listed id: a collision only delays one wake by a pass
# Ids one listing keeps at most: 30,000 x 8 bytes is 320 kB of base64, under DynamoDB's 400 kB.
MAX_LISTED = 30_000


def digest(job_id: str) -> bytes:
    """The short digest a listing keeps of ``job_id``."""
    return hashlib.blake2b(job_id.encode(), digest_size=DIGEST_BYTES).digest()


def pack(ids: set[bytes]) -> str:
    """Digests as one string (a bookkeeping field)."""
    return base64.b64encode(b"".join(sorted(ids))).decode()


def unpack(text: str) -> set[bytes]:
    """The digests ``pack`` gave."""
    raw = base64.b64decode(text)
    return {raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)}


@dataclass
class Listing:
    """A listing of the unsettled jobs under way: where each status's read stands."""

    started: float  # Lambda's clock, when its first page was read
    status: int = 0  # index in UNSETTLED_STATUSES
    end: int | None = None  # created_at bound (whole seconds, inclusive); None: the newest
    page: int = 1
    chunks: int = 0  # pages whose ids are saved in chunk rows
    count: int = 0  # ids saved so far (a job read again is counted again)
    chunks_before: int = 0  # chunks saved by earlier runs (their ids are not loaded)
    ids: set[bytes] = field(default_factory=set)  # this run's pages'
    # Not saved: the created_at of every job read under the current bound, this run.
    times: list[float] = field(default_factory=list)

    @classmethod
    def read(cls, saved: Mapping[str, str]) -> Listing | None:
        """The listing under way in the watch checkpoint's ``list_`` fields, if any."""
        if not saved.get("list_started"):
            return None
        end = saved.get("list_end")
        chunks = _whole(saved, "list_chunks")
        return cls(
            float(saved["list_started"]),
            _whole(saved, "list_status"),
            int(end) if end else None,
            _whole(saved, "list_page", 1),
            chunks,
            _whole(saved, "list_count"),
            chunks_before=chunks,
        )

    @property
    def api_status(self) -> ApiStatus:
        """The status being listed."""
        return UNSETTLED_STATUSES[self.status]

    @property
    def end_date(self) -> str | None:
        """The bound as the API's date filter takes it (None: from the newest job)."""
        return None if self.end is None else format_time(self.end)

    @property
    def read_this_run(self) -> bool:
        """Every page of it so far was read by this run."""
        return not self.chunks_before

    def completed_by(self, page: Page[JobSummary]) -> bool:
        """``page`` is the last of the last status: the listing is complete."""
        return ends(page) and self.status + 1 == len(UNSETTLED_STATUSES)

    def past(self, page: Page[JobSummary]) -> None:
        """Past ``page``: on to the next status once it ends this one's list, else to the
        next page of the same bound."""
        if ends(page):
            self.next_status()
        else:
            self.turn(page.items)

    def turn(self, items: Sequence[JobSummary]) -> None:
        """Past a page of ``items``: the next page of the same bound."""
        self.times += [job.created_at.timestamp() for job in items if job.created_at]
        self.page += 1

    def next_status(self) -> None:
        """On to the next status, from its newest job: its bound is its own."""
        self.status, self.end, self.page, self.times = self.status + 1, None, 1, []

    def resume_point(self) -> tuple[int | None, int]:
        """The bound and page a later run resumes at: the oldest second reached (rounded up, so
        its jobs are read again, never skipped), which stays valid however the list moved."""
        if not self.times:
            return self.end, self.page
        bound = int(-(-min(self.times) // 1))
        if self.end is not None and bound >= self.end:
            return self.end, self.page
        same_second = sum(bound - 1 < t <= bound for t in self.times)
        return bound, 1 + same_second // JOBS_PAGE_MAX

    def fields(self) -> dict[str, str]:
        end, page = self.resume_point()
        return {
            "list_started": f"{self.started:.3f}",
            "list_status": str(self.status),
            "list_end": "" if end is None else str(end),
            "list_page": str(page),
            "list_chunks": str(self.chunks),
            "list_count": str(self.count),
        }


@dataclass(frozen=True)
class Listed:
    """The last complete listing (``oversize``: given up, extract rows polled by age)."""

    started: float
    ids: frozenset[bytes]
    oversize: bool = False

    @classmethod
    def read(cls, saved: Mapping[str, str] | None) -> Listed | None:
        if not saved or not saved.get("started"):
            return None
        ids = frozenset(unpack(saved.get("ids", "")))
        return cls(float(saved["started"]), ids, saved.get("oversize") == "1")

    def given_up(self, now: float, retry_after: float) -> bool:
        """Given up (oversize) less than ``retry_after`` before ``now``: not listed again yet."""
        return self.oversize and now - self.started < retry_after

    def missing(self, row: LedgerRow, lag_seconds: float) -> bool:
        """``row``'s job, parked before this listing began less ``lag_seconds`` (the API lists a
        new job late), is not in it: it has settled."""
        parked_before = self.started - lag_seconds
        return row.state_since <= parked_before and digest(row.key.job_id) not in self.ids

    def fields(self) -> dict[str, str]:
        out = {"started": f"{self.started:.3f}", "ids": pack(set(self.ids))}
        if self.oversize:
            out["oversize"] = "1"
        return out


def _whole(saved: Mapping[str, str], name: str, default: int = 0) -> int:
    """A whole-number field of the checkpoint; absent or empty is ``default``."""
    return int(saved.get(name) or default)


def chunk_name(number: int) -> str:
    """The bookkeeping row of the listing under way's ``number``-th page of ids (from 0)."""
    return f"{WATCH_CHECKPOINT}-ids-{number}"
