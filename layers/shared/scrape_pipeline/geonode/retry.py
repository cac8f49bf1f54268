"""When a request is tried again, and after how long: a write only when the API certainly did
not act on it (429, no connection made); waits with full jitter, ``Retry-After`` a floor."""

from __future__ import annotations

import random
from dataclasses import dataclass

from scrape_pipeline.geonode.errors import (
    TRANSIENT_STATUSES,
    APIError,
    GeonodeError,
    RateLimitedError,
    TransportError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often a request is tried again: the n-th wait is uniform in
    [0, min(max_delay, base_delay * 2**n)], so many clients do not retry in step. The settings
    that build one (``GEONODE_RETRY_*``) refuse values that are not positive."""

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 20.0
    deadline: float = 60.0
    # Tries of a connection that could not be made at all (refused, unknown host). A Lambda
    # waits out a blip; a person at a terminal (the CLI sets 2) wants the error at once.
    connect_attempts: int = 6

    def wait(
        self, error: GeonodeError, attempt: int, is_read: bool, elapsed: float, rng: random.Random
    ) -> float | None:
        """The wait before another try, when try ``attempt`` (from 1) failed with ``error``
        ``elapsed`` seconds after the first began; None: give up (unsafe, no tries or time left)."""
        never_sent = not getattr(error, "request_sent", True)  # no connection was made
        tries = min(self.connect_attempts, self.max_attempts) if never_sent else self.max_attempts
        if attempt >= tries or not may_retry(error, is_read):
            return None
        wait = self.backoff(attempt, rng, error.retry_after)
        return wait if elapsed + wait <= self.deadline else None

    def backoff(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        """Full jitter after try ``attempt`` (from 1), ``retry_after`` the floor."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** min(attempt - 1, 30)))
        return max(rng.uniform(0.0, ceiling), retry_after or 0.0)


def may_retry(error: GeonodeError, is_read: bool) -> bool:
    """Whether trying again is safe and may help (``is_read``: a GET or HEAD); a throttled
    request (429) was not acted on, whatever its method."""
    if isinstance(error, RateLimitedError):
        return True
    if isinstance(error, TransportError):
        return is_read or not error.request_sent
    return is_read and isinstance(error, APIError) and error.status_code in TRANSIENT_STATUSES


NO_RETRY = RetryPolicy(max_attempts=1)
