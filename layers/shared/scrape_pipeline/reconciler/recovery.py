"""Making sure a job the webhooks missed is in the pipeline, recorded once and enqueued (for every
sweep and for secret rotation's replay, so "recovered" means the same everywhere)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.config.settings import FromEnv, number
from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger import lifecycle
from scrape_pipeline.ledger.decide import decide, recovery_evidence
from scrape_pipeline.ledger.evidence import Policy
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import LedgerError
from scrape_pipeline.processor.bulk_send import BulkSender, UnsentError
from scrape_pipeline.processor.message import JobMessage

# Concurrent conditional writes in ``ensure_many``: enough to hide DynamoDB's round trip, few
# enough not to crowd a small Lambda.
WRITE_WORKERS = 8


@dataclass(frozen=True)
class RecoverySettings(FromEnv):
    """When a job in flight counts as stuck."""

    stale_after_seconds: float = number(
        "STALE_AFTER_SECONDS",
        900.0,
        "a RECEIVED/ENQUEUED row unchanged this long lost its message (a crash, or a message "
        "dropped): the stuck-rows sweep enqueues it again",
    ).field()


class Recoverer:
    """Enqueue a job unless the ledger shows it finished or still moving."""

    def __init__(
        self,
        ledger: Ledger,
        queue: BulkSender,
        settings: RecoverySettings = RecoverySettings(),
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._ledger = ledger
        self._queue = queue
        self.settings = settings
        self._policy = Policy(stale_after_seconds=self.settings.stale_after_seconds)
        self._clock = clock

    def ensure_many(
        self, keys: Sequence[JobKey], rows: Mapping[JobKey, LedgerRow], *, source: str
    ) -> int:
        """Enqueue each job that needs it, given its row as ``Ledger.get_many`` gave it; how many
        were. Writes run concurrently; every job claimed is sent before the first error."""
        claimed, errors = self._claim_many(keys, rows, source=source)
        try:
            self._queue.send_many([JobMessage(key, source) for key in claimed])
        except UnsentError as exc:
            # The rows of the messages not sent go back as they were: the next run claims them
            # again, instead of the stale-row sweep a quarter of an hour later.
            for message in exc.unsent:
                _quietly(claimed[message.key])
            errors.append(exc)
        if errors:
            raise errors[0]
        return len(claimed)

    def _claim_many(
        self, keys: Sequence[JobKey], rows: Mapping[JobKey, LedgerRow], *, source: str
    ) -> tuple[dict[JobKey, Undo], list[Exception]]:
        """``_claim`` each job once, concurrently: the undo of each claim made, and the errors
        of the writes that failed (the others go on)."""
        claimed: dict[JobKey, Undo] = {}
        errors: list[Exception] = []
        with ThreadPoolExecutor(max_workers=WRITE_WORKERS) as pool:
            futures = [
                (key, pool.submit(self._claim, key, rows.get(key), source=source))
                for key in dict.fromkeys(keys)
            ]
            for key, future in futures:
                try:
                    undo = future.result()
                except (AWSUnavailableError, LedgerError) as exc:
                    errors.append(exc)
                    continue
                if undo is not None:
                    claimed[key] = undo
        return claimed, errors

    def watch_many(self, jobs: Mapping[JobKey, float], *, source: str) -> int:
        """Record WATCHING (no message: the watch sweep or its webhook wakes it) each of ``jobs``
        (key: its creation time) that has no row; how many rows were created."""

        def record(key: JobKey) -> bool:
            created = jobs[key]
            return self._ledger.record(
                key, source=source, state=JobState.WATCHING, job_created_at=created
            ).created

        with ThreadPoolExecutor(max_workers=WRITE_WORKERS) as pool:
            return sum(pool.map(record, jobs))

    def _claim(self, key: JobKey, row: LedgerRow | None, *, source: str) -> Undo | None:
        """Make the ledger write ``decide`` names for ``key`` (so no concurrent recoverer claims
        it too): None when no message is due, else the write's undo, if the send fails."""
        decision = decide(row, recovery_evidence(source), self._clock.time(), self._policy)
        if decision.move is lifecycle.RECORD:
            return self._record(key, decision.state, source=source)
        if row is None or decision.move is None:
            return None  # finished, fresh, held, or parked sick
        if decision.move is lifecycle.TAKE_OVER:
            return lambda: True  # nothing written: the processor it reaches takes the lease over
        if decision.move is lifecycle.REOPEN:
            return self._unclaim(row, self._ledger.reopened(row))
        # None when someone else moved it just now.
        return self._unclaim(row, self._ledger.enqueue(row))

    def _record(self, key: JobKey, state: JobState, *, source: str) -> Undo | None:
        recorded = self._ledger.record(key, source=source, state=state)
        if not recorded.created:
            # Lost the race to another writer: decide again on the row it left.
            return self._claim(key, recorded.row, source=source)
        # Undone by backdating it past the staleness bound: the next run sends it.
        stale = recorded.row.state_since - self.settings.stale_after_seconds - 1
        return self._unclaim(replace(recorded.row, state_since=stale), recorded.row)

    def _unclaim(self, before: LedgerRow, written: LedgerRow | None) -> Undo | None:
        if written is None:
            return None
        return lambda: self._ledger.unclaim(before, written)


# Undoes a claim's ledger write, on the exact row written (False: it moved on since).
Undo = Callable[[], bool]


def _quietly(undo: Undo) -> None:
    # If the undo fails too, the row waits for the stale-row sweep, as it did before.
    with contextlib.suppress(AWSUnavailableError):
        undo()
