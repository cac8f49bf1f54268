"""The reconciler: find every job the webhooks missed, enqueue it, and count them.

Three sweeps a run, each bounded and resumable:

    job list      the extract job list from a durable watermark (minus an overlap) up to
                  now - threshold; a settled job the ledger has not finished is enqueued. The
                  watermark never passes a job that has not settled.
    stuck rows    RECEIVED/ENQUEUED rows unchanged for ``stale_after``, PROCESSING rows with
                  an expired lease (the sparse ``pending-by-state`` index).
    delivery log  per subscription, attempts since a checkpoint that failed, were abandoned
                  or got a non-2xx answer: the job is made sure of.

The counts by sweep are the measured webhook gap (metric ``JobsRecovered``, by source).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.client import DELIVERIES_PAGE_MAX, JOBS_PAGE_MAX, GeonodeClient
from scrape_pipeline.ledger import Bookkeeping, JobKey, JobKind, JobState, Ledger
from scrape_pipeline.payload import EVENT_KINDS
from scrape_pipeline.recovery import Recoverer
from scrape_pipeline.settings import positive_number

SOURCE_JOB_LIST = "job_list"
SOURCE_STUCK_ROWS = "stuck_rows"
SOURCE_DELIVERY_LOG = "delivery_log"
JOBS_CHECKPOINT = "reconciler-jobs"


@dataclass(frozen=True)
class ReconcilerSettings:
    """The reconciler's knobs (environment variables in brackets).

    | variable | default | why |
    |---|---|---|
    | RECONCILE_THRESHOLD_SECONDS | 600 | younger jobs may still get their webhook |
    | RECONCILE_OVERLAP_SECONDS | 120 | re-read this much before the watermark (clock skew, lag) |
    | DELIVERY_OVERLAP_SECONDS | 60 | re-read this much of the delivery log (same-second ties) |
    | STALE_AFTER_SECONDS | 900 | a RECEIVED/ENQUEUED row unchanged this long lost its message |
    | RECONCILE_MAX_PAGES | 20 | API pages per run, per sweep: work is bounded, resumed next run |
    | RECONCILE_LOOKBACK_SECONDS | 86400 | how far back the very first run looks |
    | RECONCILE_ROWS_PER_STATE | 200 | stuck rows handled per state per run |
    | UNSETTLED_MAX_SECONDS | 86400 | an unsettled job older than this stops pinning the watermark |
    | DELIVERY_PAGE_SIZE | 100 | delivery-log rows a page (the API's maximum; smaller in tests) |
    """

    threshold_seconds: float = 600.0
    overlap_seconds: float = 120.0
    delivery_overlap_seconds: float = 60.0
    stale_after_seconds: float = 900.0
    max_pages: int = 20
    lookback_seconds: float = 86_400.0
    rows_per_state: int = 200
    unsettled_max_seconds: float = 86_400.0
    delivery_page_size: int = DELIVERIES_PAGE_MAX

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReconcilerSettings:
        """Read the settings; ``ValueError`` names a bad value."""
        env = os.environ if env is None else env

        def num(name: str, default: float) -> float:
            return positive_number(env, name, default)

        return cls(
            threshold_seconds=num("RECONCILE_THRESHOLD_SECONDS", cls.threshold_seconds),
            overlap_seconds=num("RECONCILE_OVERLAP_SECONDS", cls.overlap_seconds),
            delivery_overlap_seconds=num("DELIVERY_OVERLAP_SECONDS", cls.delivery_overlap_seconds),
            stale_after_seconds=num("STALE_AFTER_SECONDS", cls.stale_after_seconds),
            max_pages=int(num("RECONCILE_MAX_PAGES", cls.max_pages)),
            lookback_seconds=num("RECONCILE_LOOKBACK_SECONDS", cls.lookback_seconds),
            rows_per_state=int(num("RECONCILE_ROWS_PER_STATE", cls.rows_per_state)),
            unsettled_max_seconds=num("UNSETTLED_MAX_SECONDS", cls.unsettled_max_seconds),
            delivery_page_size=min(
                int(num("DELIVERY_PAGE_SIZE", cls.delivery_page_size)), DELIVERIES_PAGE_MAX
            ),
        )


@dataclass
class ReconcileReport:
    """What one run found and did."""

    recovered: dict[str, int] = field(
        default_factory=lambda: {SOURCE_JOB_LIST: 0, SOURCE_STUCK_ROWS: 0, SOURCE_DELIVERY_LOG: 0}
    )
    list_pages: int = 0
    delivery_pages: int = 0
    jobs_seen: int = 0
    watermark: float = 0.0
    # False when a budget ran out: the next run carries on from the checkpoints.
    complete: bool = True

    @property
    def total_recovered(self) -> int:
        """Jobs enqueued by this run, all sweeps together."""
        return sum(self.recovered.values())


@dataclass(frozen=True)
class _JobsCheckpoint:
    """The job-list sweep's durable state, one ledger bookkeeping row."""

    watermark: float
    # (range start, range end, next page, oldest unsettled so far) of a pass cut short
    resume: tuple[float, float, int, float | None] | None

    @classmethod
    def read(cls, saved: Mapping[str, str] | None, default_watermark: float) -> _JobsCheckpoint:
        if not saved:
            return cls(default_watermark, None)
        resume = None
        if saved.get("resume_page"):
            oldest = saved.get("resume_oldest")
            resume = (
                float(saved["resume_start"]),
                float(saved["resume_end"]),
                int(saved["resume_page"]),
                float(oldest) if oldest else None,
            )
        return cls(float(saved["watermark"]), resume)

    def fields(self) -> dict[str, str]:
        out = {"watermark": f"{self.watermark:.3f}"}
        if self.resume is not None:
            start, end, page, oldest = self.resume
            out.update(
                resume_start=f"{start:.3f}",
                resume_end=f"{end:.3f}",
                resume_page=str(page),
                resume_oldest="" if oldest is None else f"{oldest:.3f}",
            )
        return out


class Reconciler:
    """One reconciliation run at a time (the template reserves a concurrency of one)."""

    def __init__(
        self,
        settings: ReconcilerSettings,
        *,
        ledger: Ledger,
        client: GeonodeClient,
        recoverer: Recoverer,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._books = Bookkeeping(ledger)
        self._client = client
        self._recoverer = recoverer
        self._clock = clock

    def run(self) -> ReconcileReport:
        """All three sweeps, most specific evidence first, so the gap is attributed to its cause:
        a row we lost, then a delivery the receiver did not take, then an event never sent."""
        report = ReconcileReport()
        self.sweep_stuck_rows(report)
        self.sweep_delivery_log(report)
        self.sweep_job_list(report)
        return report

    # -- job list --------------------------------------------------------------------------

    def sweep_job_list(self, report: ReconcileReport) -> None:
        """Enqueue settled jobs older than the threshold that the ledger has not finished.

        A pass reads [watermark - overlap, now - threshold] newest first, page by page. A run
        that runs out of pages saves where it stopped (the range lies in the past, so its
        pages do not move) and the next run resumes there. When a pass completes, the
        watermark moves to its end, or to the oldest job in it that had not settled.
        """
        s = self.settings
        now = self._clock.time()
        mark = _JobsCheckpoint.read(self._books.read(JOBS_CHECKPOINT), now - s.lookback_seconds)
        if mark.resume is not None:
            start, end, page, oldest = mark.resume
        else:
            start, end = mark.watermark - s.overlap_seconds, now - s.threshold_seconds
            page, oldest = 1, None
        watermark = mark.watermark
        resume: tuple[float, float, int, float | None] | None = None
        if start < end:
            oldest, next_page = self._sweep_range(start, end, page, oldest, report=report, now=now)
            if next_page is not None:
                resume = (start, end, next_page, oldest)
                report.complete = False
            else:
                watermark = max(watermark, end if oldest is None else oldest)
        report.watermark = watermark
        self._books.write(JOBS_CHECKPOINT, _JobsCheckpoint(watermark, resume).fields())

    def _sweep_range(
        self,
        start: float,
        end: float,
        page: int,
        oldest_unsettled: float | None,
        *,
        report: ReconcileReport,
        now: float,
    ) -> tuple[float | None, int | None]:
        """Read a range from ``page``; returns (oldest unsettled, next page if cut short)."""
        for _ in range(self.settings.max_pages):
            listing = self._client.list_jobs(
                start_date=start, end_date=end, page=page, page_size=JOBS_PAGE_MAX
            )
            report.list_pages += 1
            report.jobs_seen += len(listing.items)
            settled: list[JobKey] = []
            for row in listing.items:
                created = row.created_at.timestamp() if row.created_at else start
                if row.is_terminal:
                    settled.append(JobKey(JobKind.EXTRACT, row.job_id))
                elif now - created < self.settings.unsettled_max_seconds:
                    # Not settled yet: the watermark must not pass it.
                    oldest_unsettled = (
                        created if oldest_unsettled is None else min(oldest_unsettled, created)
                    )
            report.recovered[SOURCE_JOB_LIST] += self._ensure(settled, SOURCE_JOB_LIST)
            if listing.is_last or not listing.items:
                return oldest_unsettled, None
            page += 1
        return oldest_unsettled, page

    # -- stuck rows ------------------------------------------------------------------------

    def sweep_stuck_rows(self, report: ReconcileReport) -> None:
        """Re-enqueue rows whose message was lost and leases whose holder died."""
        now = self._clock.time()
        limit = self.settings.rows_per_state
        stale_before = now - self.settings.stale_after_seconds
        recovered = 0
        for state in (JobState.RECEIVED, JobState.ENQUEUED):
            rows, more = self._ledger.pending(state, since_before=stale_before, limit=limit)
            report.complete &= more is None
            for row in rows:
                recovered += self._recoverer.ensure(row.key, row, source=SOURCE_STUCK_ROWS)
        # A lease lasts far less than STALE_AFTER; rows leased before now may have expired.
        rows, more = self._ledger.pending(JobState.PROCESSING, since_before=now, limit=limit)
        report.complete &= more is None
        for row in rows:
            if row.lease_expired(now):
                recovered += self._recoverer.ensure(row.key, row, source=SOURCE_STUCK_ROWS)
        report.recovered[SOURCE_STUCK_ROWS] += recovered

    # -- delivery log ----------------------------------------------------------------------

    def sweep_delivery_log(self, report: ReconcileReport) -> None:
        """Make sure of every job whose delivery failed since each subscription's checkpoint.

        Only attempts the log marks ``failed`` are read (the API filters them), so a run costs
        one page per subscription when deliveries go well; every abandoned delivery had failed
        attempts before it. The checkpoint is the newest attempt seen, on the sender's clock.
        """
        for hook in self._client.list_webhooks():
            name = f"deliveries-{hook.id}"
            saved = self._books.read(name)
            since = (
                float(saved["checkpoint"])
                if saved
                else self._clock.time() - self.settings.lookback_seconds
            )
            keys, newest, finished = self._scan_failed(
                hook.id, since - self.settings.delivery_overlap_seconds, report
            )
            report.recovered[SOURCE_DELIVERY_LOG] += self._ensure(keys, SOURCE_DELIVERY_LOG)
            if finished and (saved is None or newest > since):
                self._books.write(name, {"checkpoint": f"{max(newest, since):.3f}"})
            report.complete &= finished

    def replay_failed(
        self,
        webhook_id: str,
        *,
        since: float,
        report: ReconcileReport,
        only_status: int | None = None,
        source: str = SOURCE_DELIVERY_LOG,
    ) -> int:
        """Ensure the jobs of failed deliveries since ``since``; ``only_status`` narrows (401)."""
        keys, _, finished = self._scan_failed(webhook_id, since, report, only_status)
        report.complete &= finished
        return self._ensure(keys, source)

    def _scan_failed(
        self,
        webhook_id: str,
        since: float,
        report: ReconcileReport,
        only_status: int | None = None,
    ) -> tuple[list[JobKey], float, bool]:
        """Jobs of failed attempts since ``since`` (newest first, bounded by the page budget).

        Returns the keys, the newest attempt time seen, and whether ``since`` was reached.
        """
        keys: list[JobKey] = []
        newest = since
        for page in range(1, self.settings.max_pages + 1):
            listing = self._client.list_deliveries(
                webhook_id, status="failed", page=page, page_size=self.settings.delivery_page_size
            )
            report.delivery_pages += 1
            for delivery in listing.items:
                created = delivery.created_at.timestamp() if delivery.created_at else since
                if created < since:
                    return list(dict.fromkeys(keys)), newest, True
                newest = max(newest, created)
                if only_status is not None and delivery.http_status != only_status:
                    continue
                kind = EVENT_KINDS.get(delivery.event_type)
                if kind is not None and delivery.job_id:
                    keys.append(JobKey(kind, delivery.job_id))
            if listing.is_last or not listing.items:
                return list(dict.fromkeys(keys)), newest, True
        return list(dict.fromkeys(keys)), newest, False

    # -- shared ----------------------------------------------------------------------------

    def _ensure(self, keys: Sequence[JobKey], source: str) -> int:
        recovered = 0
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            rows = self._ledger.get_many(chunk)
            for key in chunk:
                recovered += self._recoverer.ensure(key, rows.get(key), source=source)
        return recovered
