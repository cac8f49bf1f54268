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
    [0, min(max_delay, base_delay * 2**n)], so many clients do not retry in step."""

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
        return max(rng.uniform(0.0, ceiling), retry_after or 0.0)

    def allows(self, error: GeonodeError, attempt: int, is_read: bool) -> bool:
        """Whether try ``attempt`` (from 1), failed with ``error``, is followed by another."""
        tries = self.max_attempts
        if isinstance(error, TransportError) and not error.request_sent:
            tries = min(self.connect_attempts, self.max_attempts)  # it never connected
        return may_retry(error, is_read) and attempt < tries


def may_retry(error: GeonodeError, is_read: bool) -> bool:
    """Whether trying again is safe and may help (``is_read``: a GET or HEAD)."""
    if isinstance(error, RateLimitedError):
        return True  # a 429 is an APIError, but a throttled request was not acted on
    if isinstance(error, TransportError):
        return is_read or not error.request_sent
    if isinstance(error, APIError):
        return is_read and error.status_code in TRANSIENT_STATUSES
    return False


NO_RETRY = RetryPolicy(max_attempts=1)
