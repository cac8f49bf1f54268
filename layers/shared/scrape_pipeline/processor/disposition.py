"""What became of one job message in the processor (not the ledger's ``jobs.Outcome``: a message
may end "busy" while its job goes on), each with the metric that counts it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


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
        """The metric this outcome counts in (a 404 of an unproven job counts as not settled)."""
        return _METRICS[self]


_METRICS: dict[MessageOutcome, str] = {
    MessageOutcome.STORED: "JobsStored",
    MessageOutcome.RESUBMITTED: "JobsResubmitted",
    MessageOutcome.DEAD_LETTERED: "JobsDeadLettered",
    MessageOutcome.POISONED: "JobsPoisoned",
    MessageOutcome.CANCELLED: "JobsCancelled",
    MessageOutcome.NOT_SETTLED: "JobsNotSettled",
    MessageOutcome.NOT_FOUND: "JobsNotSettled",
    MessageOutcome.WATCHING: "JobsWatching",
    MessageOutcome.ITEMS_RETRYING: "JobsItemsRetrying",
    MessageOutcome.PARKED: "JobsParkedSick",
    MessageOutcome.IN_PROGRESS: "JobsInProgress",
    MessageOutcome.OUT_OF_TIME: "ProcessorOutOfTime",
    MessageOutcome.FAILED_ATTEMPT: "JobsFailedAttempt",
    MessageOutcome.THROTTLED: "GeonodeThrottled",
    MessageOutcome.API_UNAVAILABLE: "GeonodeUnavailable",
    MessageOutcome.AWS_UNAVAILABLE: "ProcessorAWSUnavailable",
    MessageOutcome.BUSY: "JobsBusy",
    MessageOutcome.ALREADY_DONE: "JobsAlreadyDone",
    MessageOutcome.LEASE_LOST: "JobsLeaseLost",
    MessageOutcome.IN_DOUBT: "JobsInDoubt",
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
