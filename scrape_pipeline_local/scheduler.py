"""The EventBridge schedule, stood in: call a handler every ``interval`` seconds of a clock.

A scheduled rule invokes its function asynchronously, so Lambda retries an invocation that
raised or timed out: twice by default, about 1 minute and then 2 minutes later (on the
stack's clock), with the same event and request id. Each run's result is in ``runs``; each
failed attempt in ``failures``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scrape_pipeline_local.lambda_runtime import (
    LAMBDA_DEFAULT_TIMEOUT_SECONDS,
    RunsAFunction,
    TimedInvoker,
)

Handler = Callable[[dict[str, Any], Any], Any]

# Lambda's asynchronous invocation: MaximumRetryAttempts is 0 to 2, 2 by default, and the
# retries come about 1 and 2 minutes after the failures.
DEFAULT_ASYNC_RETRIES = 2
_ASYNC_RETRY_DELAYS_SECONDS = (60.0, 120.0)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailedRun:
    """One attempt that raised or timed out."""

    at: float  # the clock's time when it started
    attempt: int  # 0 for the scheduled invocation, then 1, 2 for Lambda's retries
    request_id: str
    error: str  # the exception's repr, or "timed out"
    timed_out: bool
    retry_at: float | None  # None: Lambda gave up on this event


@dataclass(frozen=True)
class _Pending:
    due: float
    event: dict[str, Any]
    attempt: int
    request_id: str


class Schedule(RunsAFunction):
    """Runs ``handler`` with a scheduled event when the clock reaches each due time."""

    def __init__(
        self,
        handler: Handler,
        interval: float,
        clock: Any,
        *,
        function_name: str = "reconciler",
        first_run_after: float | None = None,
        timeout_seconds: float = LAMBDA_DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_ASYNC_RETRIES,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        if not 0 <= max_retries <= len(_ASYNC_RETRY_DELAYS_SECONDS):
            raise ValueError(f"max_retries must be 0 to {len(_ASYNC_RETRY_DELAYS_SECONDS)}")
        self._invoker = TimedInvoker(handler, function_name, timeout_seconds)
        self.interval = interval
        self.max_retries = max_retries
        self._clock = clock
        self.next_run = clock.time() + (interval if first_run_after is None else first_run_after)
        self.runs: list[Any] = []  # what each successful run returned
        self.failures: list[FailedRun] = []
        self.gave_up = 0  # events dropped after their last retry failed
        self._retries: list[_Pending] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> bool:
        """Run one due invocation (a retry first, else the schedule's); True when one ran."""
        now = self._clock.time()
        due = [pending for pending in self._retries if pending.due <= now]
        if due:
            retry = min(due, key=lambda pending: pending.due)
            self._retries.remove(retry)
            self._run(retry, now)
            return True
        if now < self.next_run:
            return False
        # A scheduler that fell behind runs once, not once per missed slot (as EventBridge).
        while self.next_run <= now:
            self.next_run += self.interval
        event = {
            "version": "0",
            "source": "aws.scheduler",
            "detail-type": "Scheduled Event",
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            "detail": {},
        }
        self._run(_Pending(now, event, 0, ""), now)
        return True

    def retry_due(self) -> float | None:
        """When Lambda's next retry of a failed run falls due (None: no retry pending)."""
        return min((pending.due for pending in self._retries), default=None)

    def _run(self, pending: _Pending, now: float) -> None:
        outcome = self._invoker.invoke(pending.event, request_id=pending.request_id or None)
        if outcome.ok:
            self.runs.append(outcome.result)
            return
        retry_at = None
        if pending.attempt < self.max_retries:
            retry_at = now + _ASYNC_RETRY_DELAYS_SECONDS[pending.attempt]
            self._retries.append(
                _Pending(retry_at, pending.event, pending.attempt + 1, outcome.request_id)
            )
        else:
            self.gave_up += 1
        self.failures.append(
            FailedRun(
                at=now,
                attempt=pending.attempt,
                request_id=outcome.request_id,
                error="timed out" if outcome.timed_out else repr(outcome.error),
                timed_out=outcome.timed_out,
                retry_at=retry_at,
            )
        )
        logger.warning(
            "%s attempt %d failed (%s); %s",
            self._invoker.function_name,
            pending.attempt,
            self.failures[-1].error,
            "giving up" if retry_at is None else f"retrying at {retry_at:.0f}",
            exc_info=outcome.error,
        )

    def start(self, poll: float = 0.05) -> None:
        """Tick in a background thread until ``stop``."""

        def loop() -> None:
            while not self._stop.is_set():
                self.tick()
                time.sleep(poll)

        self._thread = threading.Thread(target=loop, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
