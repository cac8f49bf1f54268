"""What became of one job message in the processor (not the ledger's ``jobs.Outcome``: a message
may end "busy" while its job goes on), the metric that counts it, and when it comes back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import RateLimitedError
from scrape_pipeline.geonode.listing_lag import ListingCatchingUpError
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.processor.deadline import OutOfTimeError
from scrape_pipeline.processor.settings import ProcessorSettings

# SQS caps a visibility timeout at 12 h; our waits stay far below.
MAX_VISIBILITY_SECONDS = 43_200


class MessageOutcome(StrEnum):
    """One message's outcome (its value is what the processor logs as ``outcome``)."""

    STORED = "stored"
    RESUBMITTED = "resubmitted"
    DEAD_LETTERED = "dead_lettered"
    POISONED = "poisoned"
    CANCELLED = "cancelled"
    NOT_SETTLED = "not_settled"
    NOT_FOUND = "not_found"
    WATCHING = "watching"
    ITEMS_RETRYING = "items_retrying"
    PARKED = "parked"
    IN_PROGRESS = "in_progress"
    OUT_OF_TIME = "out_of_time"
    FAILED_ATTEMPT = "failed_attempt"
    THROTTLED = "throttled"
    API_UNAVAILABLE = "api_unavailable"
    AWS_UNAVAILABLE = "aws_unavailable"
    BUSY = "busy"
    ALREADY_DONE = "already_done"
    LEASE_LOST = "lease_lost"
    # A POST's answer was lost and the job list may not show its job yet: looked for later.
    IN_DOUBT = "in_doubt"

    @property
    def metric(self) -> str:
        """The metric this outcome counts in: ``JobsDeadLettered`` for ``dead_lettered``."""
        return _METRICS.get(self, "Jobs" + self.title().replace("_", ""))


# The metrics not named ``Jobs`` and the outcome's words (a 404 of an unproven job counts as
# not settled).
_METRICS: dict[MessageOutcome, str] = {
    MessageOutcome.NOT_FOUND: "JobsNotSettled",
    MessageOutcome.PARKED: "JobsParkedSick",
    MessageOutcome.OUT_OF_TIME: "ProcessorOutOfTime",
    MessageOutcome.THROTTLED: "GeonodeThrottled",
    MessageOutcome.API_UNAVAILABLE: "GeonodeUnavailable",
    MessageOutcome.AWS_UNAVAILABLE: "ProcessorAWSUnavailable",
}


# A batch's or crawl's items resubmitted as extract jobs (its items dead-lettered count in
# ``MessageOutcome.DEAD_LETTERED.metric``).
ITEMS_RETRIED_METRIC = "ItemsRetried"


@dataclass(frozen=True)
class Disposition:
    """What became of one message: ``retry_in`` seconds means "bring it back then"; a batch's
    items dead-lettered (counted once, at its close) and resubmitted."""

    outcome: MessageOutcome
    retry_in: int | None = None
    detail: str = ""
    items_dead_lettered: int = 0
    items_retried: int = 0

    def item_metrics(self) -> dict[str, int]:
        """The item counts as metrics (those that are not zero)."""
        counts = {
            MessageOutcome.DEAD_LETTERED.metric: self.items_dead_lettered,
            ITEMS_RETRIED_METRIC: self.items_retried,
        }
        return {name: n for name, n in counts.items() if n}


def items_dead(detail: Mapping[str, str]) -> int:
    """A closed batch's or crawl's items dead-lettered, as its detail counts them."""
    return int(detail.get("items_failed") or 0)


def seconds(wait: float) -> int:
    """A wait as SQS takes it: whole seconds, from 1 to 12 h."""
    return max(1, min(MAX_VISIBILITY_SECONDS, math.ceil(wait)))


def backoff(settings: ProcessorSettings, tries: int) -> int:
    """The wait after ``tries`` in a row: doubling from the base, at most the longest."""
    wait = settings.retry_base_seconds * 2 ** min(max(tries, 0), 20)
    return seconds(min(wait, settings.retry_max_seconds))


def retry_after(
    exc: Exception, row: LedgerRow, settings: ProcessorSettings, now: float
) -> Disposition:
    """When to bring back a message whose lease ``exc`` made us hand back at once."""
    if isinstance(exc, OutOfTimeError):
        return Disposition(MessageOutcome.IN_PROGRESS, 1)
    if isinstance(exc, ListingCatchingUpError):  # a POST's answer lost: in doubt till then
        return Disposition(MessageOutcome.IN_DOUBT, exc.retry_in(now))
    if isinstance(exc, AWSUnavailableError):
        return Disposition(
            MessageOutcome.AWS_UNAVAILABLE, backoff(settings, row.releases), str(exc)
        )
    if isinstance(exc, RateLimitedError):
        wait = exc.retry_after or settings.throttle_default_seconds
        return Disposition(MessageOutcome.THROTTLED, seconds(wait))
    return Disposition(
        MessageOutcome.API_UNAVAILABLE, backoff(settings, row.releases), type(exc).__name__
    )
