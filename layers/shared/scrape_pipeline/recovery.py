"""Making sure a job the webhooks missed is in the pipeline: recorded once, enqueued.

Shared by the reconciler (job list, stuck rows, delivery log) and secret rotation (replaying
deliveries rejected during the switch-over), so "recovered" means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.jobs import SOURCE_WATCH, JobKey, JobState
from scrape_pipeline.ledger import Ledger, LedgerError, LedgerRow
from scrape_pipeline.queue import JobMessage, JobQueue

# Concurrent conditional writes in ``ensure_many``: enough to hide DynamoDB's round trip,
# few enough not to crowd a small Lambda (boto3 clients are thread-safe; resources are not).
WRITE_WORKERS = 8


@dataclass(frozen=True)
class RecoverySettings:
    """When a job in flight counts as stuck."""

    # A RECEIVED/ENQUEUED row this old lost its message (crash, or a message dropped).
    stale_after_seconds: float = 900.0


class Recoverer:
    """Enqueue a job unless the ledger shows it finished or still moving."""

    def __init__(
        self,
        ledger: Ledger,
        queue: JobQueue,
        settings: RecoverySettings | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._ledger = ledger
        self._queue = queue
        self.settings = settings or RecoverySettings()
        self._clock = clock

    def ensure(self, key: JobKey, row: LedgerRow | None, *, source: str) -> bool:
        """Enqueue ``key`` if it needs it, given its row as just read; True when enqueued.

        Callers call it with evidence that the job settled (job list, delivery log) or that
        its row is stuck; a WATCHING row is only passed when its job was found settled.
        """
        if not self._claim(key, row, source=source):
            return False
        self._queue.send(JobMessage(key, source))
        return True

    def ensure_many(
        self, keys: Sequence[JobKey], rows: Mapping[JobKey, LedgerRow], *, source: str
    ) -> int:
        """``ensure`` for many jobs at once, given their rows as ``Ledger.get_many`` returned
        them (a key missing from ``rows`` has no row); returns how many were enqueued.

        The same decision per job as ``ensure``; only the calls are batched: the ledger writes
        run concurrently, then every job claimed goes out ten to a SendMessageBatch. A write
        that fails does not stop the others, and the jobs claimed are still sent before the
        first error is raised, so nothing claimed waits for the stuck-rows sweep needlessly.
        """
        unique = list(dict.fromkeys(keys))
        claimed: list[JobKey] = []
        error: Exception | None = None
        with ThreadPoolExecutor(max_workers=WRITE_WORKERS) as pool:
            futures = [
                (key, pool.submit(self._claim, key, rows.get(key), source=source)) for key in unique
            ]
            for key, future in futures:
                try:
                    if future.result():
                        claimed.append(key)
                except (AWSUnavailableError, LedgerError) as exc:
                    error = error or exc
        self._queue.send_many([JobMessage(key, source) for key in claimed])
        if error is not None:
            raise error
        return len(claimed)

    def watch_many(self, jobs: Mapping[JobKey, float], *, source: str) -> int:
        """Record WATCHING the unsettled jobs of ``jobs`` (key: the job's creation time) that
        have no row, concurrently; returns how many rows were created.

        No message: the watch sweep wakes each once the API stops listing it unsettled, and
        its webhook, if one comes, wakes it first. A row someone else wrote meanwhile stays.
        """
        if not jobs:
            return 0

        def record(key: JobKey) -> bool:
            created = jobs[key]
            return self._ledger.record(
                key, source=source, state=JobState.WATCHING, job_created_at=created
            ).created

        with ThreadPoolExecutor(max_workers=WRITE_WORKERS) as pool:
            return sum(pool.map(record, jobs))

    def _claim(self, key: JobKey, row: LedgerRow | None, *, source: str) -> bool:
        """The one decision: make the ledger write ``key`` needs; True when a message is due.

        Every path that returns True has moved the row (or found a dead lease) so that no
        concurrent recoverer also claims it; the caller sends the message.
        """
        if row is None:
            recorded = self._ledger.record(key, source=source, state=JobState.ENQUEUED)
            # Lost the race to another writer: decide again on the row it left.
            return recorded.created or self._claim(key, recorded.row, source=source)
        if row.is_done:
            # Evidence that it settled overturns a close as "unknown" or "never settled".
            return row.reopenable and self._ledger.reopen(row)
        if row.state is JobState.WATCHING:
            if row.failing_since is not None and source != SOURCE_WATCH:
                # Parked because its own GET keeps failing: that it settled is known already,
                # and a list that shows it settled on every read would wake it every run. The
                # watch sweep polls it on its capped schedule.
                return False
            # A parked long-running job the caller found settled: wake it now.
            return self._ledger.mark_enqueued(row)
        now = self._clock.time()
        if row.state is JobState.PROCESSING:
            # The holder died; its message may be gone (redriven, or expired): send another.
            return row.lease_expired(now)
        if row.state_since >= now - self.settings.stale_after_seconds:
            return False  # fresh: its message is on the way
        # False when someone else moved it just now.
        return self._ledger.mark_enqueued(row)
