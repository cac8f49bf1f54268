"""When a request is tried again, and after how long: a write only when the API certainly did
not act on it (429, no connection made); waits with full jitter, ``Retry-After`` a floor."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

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
        never_sent = isinstance(error, TransportError) and not error.request_sent
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
    """Whether trying again is safe and may help (``is_read``: a GET or HEAD)."""
    when = next(_RETRY_WHEN[kind] for kind in type(error).__mro__ if kind in _RETRY_WHEN)
    return when(error, is_read)


# When each kind of error may be tried again, given ``is_read``; an error takes the rule of the
# nearest class in its MRO (a 429 is an APIError, but throttled requests were not acted on).
_RETRY_WHEN: Final[Mapping[type[GeonodeError], Callable[[Any, bool], bool]]] = {
    RateLimitedError: lambda error, is_read: True,
    TransportError: lambda error, is_read: is_read or not error.request_sent,
    APIError: lambda error, is_read: is_read and error.status_code in TRANSIENT_STATUSES,
    GeonodeError: lambda error, is_read: False,
}


NO_RETRY = RetryPolicy(max_attempts=1)
