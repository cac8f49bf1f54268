"""``GEONODE_RETRY_*``: the operator CLI's retries of one API call. No Lambda reads them: the
processor never retries within a call and the reconciler has ``wiring.RECONCILER_RETRY``."""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.config.settings import FromEnv, integer, number
from scrape_pipeline.geonode.retry import RetryPolicy

_RETRIES = "same clients as `GEONODE_RETRY_MAX_ATTEMPTS`"


@dataclass(frozen=True)
class RetrySettings(FromEnv):
    """How the CLI's client retries (the declarations are the documentation)."""

    max_attempts: int = integer(
        "GEONODE_RETRY_MAX_ATTEMPTS",
        6,
        "attempts at one API call of the operator CLI's client (a client built without a policy "
        "of its own uses `RetryPolicy`'s defaults, these). Not the Lambdas': the processor never "
        "retries within a call (`NO_RETRY`: the job's message comes back later), and the "
        "reconciler, with the CLI commands that run it, uses `wiring.RECONCILER_RETRY`. Reads "
        "are retried after 429, 5xx and network errors, exponential with full jitter, "
        "`Retry-After` honoured; creations only when the API certainly did not act (429, no "
        "connection)",
    ).field()
    base_delay: float = number(
        "GEONODE_RETRY_BASE_DELAY_SECONDS",
        0.5,
        f"the first backoff's ceiling, doubled at each retry ({_RETRIES})",
    ).field()
    max_delay: float = number(
        "GEONODE_RETRY_MAX_DELAY_SECONDS", 20.0, f"the longest backoff ({_RETRIES})"
    ).field()
    deadline: float = number(
        "GEONODE_RETRY_DEADLINE_SECONDS",
        60.0,
        f"the most time one call spends retrying ({_RETRIES})",
    ).field()

    def policy(self, *, connect_attempts: int) -> RetryPolicy:
        """The policy these settings describe, trying a connection ``connect_attempts`` times."""
        return RetryPolicy(
            max_attempts=self.max_attempts,
            base_delay=self.base_delay,
            max_delay=self.max_delay,
            deadline=self.deadline,
            connect_attempts=connect_attempts,
        )
