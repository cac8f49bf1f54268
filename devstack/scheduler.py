"""The EventBridge schedule, stood in: call a handler every ``interval`` seconds of a clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from devstack.apigw import LambdaContext

Handler = Callable[[dict[str, Any], Any], Any]


class Schedule:
    """Runs ``handler`` with a scheduled event when the clock reaches each due time."""

    def __init__(
        self,
        handler: Handler,
        interval: float,
        clock: Any,
        *,
        function_name: str = "reconciler",
        first_run_after: float | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self._handler = handler
        self.interval = interval
        self._clock = clock
        self._context = LambdaContext(function_name)
        self.next_run = clock.time() + (interval if first_run_after is None else first_run_after)
        self.runs: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> bool:
        """Run once if due; True when it ran."""
        now = self._clock.time()
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
        self.runs.append(self._handler(event, self._context))
        return True

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
