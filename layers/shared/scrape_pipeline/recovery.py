"""Making sure a job the webhooks missed is in the pipeline: recorded once, enqueued.

Shared by the reconciler (job list, stuck rows, delivery log) and secret rotation (replaying
deliveries rejected during the switch-over), so "recovered" means the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.ledger import JobKey, JobState, Ledger, LedgerRow
from scrape_pipeline.queue import JobMessage, JobQueue


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
        if row is None:
            recorded = self._ledger.record(key, source=source, state=JobState.ENQUEUED)
            if not recorded.created:
                return self.ensure(key, recorded.row, source=source)
            self._queue.send(JobMessage(key, source))
            return True
        if row.is_done:
            # Evidence that it settled overturns a close as "unknown" or "never settled".
            if row.reopenable and self._ledger.reopen(row):
                self._queue.send(JobMessage(key, source))
                return True
            return False
        if row.state is JobState.WATCHING:
            # A parked long-running job the caller found settled: wake it now.
            if not self._ledger.mark_enqueued(row):
                return False
            self._queue.send(JobMessage(key, source))
            return True
        now = self._clock.time()
        if row.state is JobState.PROCESSING:
            if not row.lease_expired(now):
                return False
            # The holder died; its message may be gone (redriven, or expired): send another.
            self._queue.send(JobMessage(key, source))
            return True
        if row.state_since >= now - self.settings.stale_after_seconds:
            return False  # fresh: its message is on the way
        if not self._ledger.mark_enqueued(row):
            return False  # someone else moved it just now
        self._queue.send(JobMessage(key, source))
        return True
