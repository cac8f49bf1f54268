"""The simulator's records: timed units of work and the jobs, batches and crawls made of them.

Status is never stored: it is derived from the clock and the times fixed at creation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a unit of work ends, drawn when it is submitted."""

    status: str  # completed | failed | cancelled
    http_status: int | None = 200  # the target's answer
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False
    retry_count: int = 0


CANCELLED = Outcome(status="cancelled", http_status=None)


@dataclass(slots=True)
class Work:
    """One URL scraped once: an extract job, a batch item or a crawl page."""

    url: str
    formats: tuple[str, ...]
    render_js: bool
    created_at: float
    started_at: float
    settle_at: float
    outcome: Outcome
    tokens: int
    content_bytes: int = 0  # size of each text format once completed; 0: the natural page

    def status(self, now: float) -> str:
        """queued, processing, then the drawn outcome once ``settle_at`` has passed."""
        if now >= self.settle_at:
            return self.outcome.status
        return "queued" if now < self.started_at else "processing"

    def cancel(self, now: float) -> None:
        """Cancel work that has not started: it settles now, as cancelled."""
        self.started_at = self.settle_at = now
        self.outcome = CANCELLED

    def tokens_charged(self, now: float) -> int:
        """Only completed work is charged."""
        return self.tokens if self.status(now) == "completed" else 0

    def duration_ms(self) -> int:
        return round((self.settle_at - self.started_at) * 1000)


@dataclass(slots=True)
class ExtractJob:
    """A ``POST /v1/extract`` job."""

    job_id: str
    account: str
    processing_mode: str
    work: Work


@dataclass(slots=True)
class Batch:
    """A ``POST /v1/batch`` job: its items keep their input index."""

    job_id: str
    account: str
    created_at: float
    items: list[tuple[int, Work]]
    invalid_urls: int
    cancelled_at: float | None = None

    @property
    def settle_at(self) -> float:
        # Cancelled items settle when cancelled: after a cancel this is when in-flight ones drain.
        return max(work.settle_at for _, work in self.items)

    def status(self, now: float) -> str:
        # Like a crawl's: cancelled at once, while items already running still drain.
        if self.cancelled_at is not None:
            return "cancelled"
        if now >= self.settle_at:
            return "completed"
        started = any(now >= work.started_at for _, work in self.items)
        return "processing" if started else "queued"


@dataclass(slots=True)
class Crawl:
    """A ``POST /v1/crawl`` job: pages in discovery order, timed by a small worker pool."""

    job_id: str
    account: str
    created_at: float
    url: str
    pages: list[Work]
    cancelled_at: float | None = None
    settle_at: float = 0.0

    def status(self, now: float) -> str:
        # Cancelled is terminal at once; in-flight pages still drain (see Simulator.cancel_crawl).
        if self.cancelled_at is not None:
            return "cancelled"
        if now >= self.settle_at:
            return "completed"
        started = any(now >= work.started_at for work in self.pages)
        return "processing" if started else "queued"


@dataclass(slots=True)
class Account:
    """Everything one API key owns."""

    key: str
    jobs: list[ExtractJob] = field(default_factory=list)  # creation order: lists scan it reversed
    jobs_by_id: dict[str, ExtractJob] = field(default_factory=dict)
    batches: dict[str, Batch] = field(default_factory=dict)
    crawls: dict[str, Crawl] = field(default_factory=dict)


def counters(works: list[Work], now: float) -> dict[str, int]:
    """Status counts over ``works``: completed, failed, cancelled, pending."""
    counts = {"completed": 0, "failed": 0, "cancelled": 0, "pending": 0}
    for work in works:
        status = work.status(now)
        counts[status if status in TERMINAL else "pending"] += 1
    return counts
