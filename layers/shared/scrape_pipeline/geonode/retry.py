"""When a request is tried again, and after how long: the client's one place for both.

A read (GET) is retried on 429, 5xx, 408 and network errors; a request that creates or
changes something only when the API certainly did not act on it (429, or the connection was
never made), never after a timeout. Waits: exponential backoff with full jitter under a total
deadline, honouring ``Retry-After``.
"""

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
    """How long and how often a request is tried again.

    The n-th wait (n from 0) is uniform in [0, min(max_delay, base_delay * 2**n)]: full
    jitter keeps many clients from retrying in step. A server's ``Retry-After`` is a floor.
    """

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 20.0
    deadline: float = 60.0
    # Tries of a connection that could not be made at all (refused, unknown host). A Lambda
    # waits out a blip; a person at a terminal (the CLI sets 2) wants the error at once.
    connect_attempts: int = 6

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.connect_attempts < 1:
            raise ValueError("max_attempts and connect_attempts must be at least 1")
        if self.base_delay <= 0 or self.max_delay < self.base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        if self.deadline <= 0:
            raise ValueError("deadline must be positive")

    def backoff(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """The wait before try ``attempt + 1`` (``attempt`` counts failures so far, from 0)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** min(attempt, 30)))
        wait = rng.uniform(0.0, ceiling)
        if retry_after is not None and retry_after > wait:
            wait = retry_after
        return wait

    def attempts_for(self, error: GeonodeError) -> int:
        """How many tries a request that failed with ``error`` gets in all."""
        if isinstance(error, TransportError) and not error.request_sent:
            return min(self.connect_attempts, self.max_attempts)
        return self.max_attempts


def may_retry(error: GeonodeError, is_read: bool) -> bool:
    """Whether trying again is safe and may help (``is_read``: a GET or HEAD)."""
    if isinstance(error, RateLimitedError):
        return True  # throttled requests were not acted on
    if isinstance(error, TransportError):
        return is_read or not error.request_sent
    if isinstance(error, APIError):
        return is_read and error.status_code in TRANSIENT_STATUSES
    return False


NO_RETRY = RetryPolicy(max_attempts=1)
