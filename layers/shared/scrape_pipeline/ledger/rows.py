"""A job's row: the ``LedgerRow`` model and its marshalling to and from DynamoDB items."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.jobs import REOPENABLE_REASONS, JobKey, JobState, Outcome
from scrape_pipeline.ledger.attributes import (
    PARTITION_KEY,
    REOPENS,
    SEEN_DELIVERIES,
    STATE_SINCE,
    STRUCK_BY,
    TTL_ATTRIBUTE,
)


@dataclass(frozen=True)
class LedgerRow:
    """One job's row."""

    key: JobKey
    state: JobState
    state_since: float
    created_at: float
    source: str
    attempts: int = 0
    releases: int = 0
    outcome: Outcome | None = None
    lease_owner: str | None = None
    lease_until: float | None = None
    token: str | None = field(default=None, repr=False)
    detail: dict[str, str] = field(default_factory=dict)
    finished_at: float | None = None
    strikes: int = 0
    not_found: int = 0
    last_error: str | None = None
    # A batch's or crawl's storing progress: the next page to read, items done so far, and
    # the items of that page already done (a page too long for one invocation is split).
    next_page: int = 1
    next_item: int = 0
    items_stored: int = 0
    items_failed: int = 0
    # The longest page the last attempt to checkpoint took (seconds): the next attempt's
    # estimate of its first page, before it has timed one itself.
    page_seconds: float = 0.0
    expires_at: float | None = None
    # When the job itself was created (API time), kept for WATCHING rows: the row is younger.
    job_created_at: float | None = None
    # When the first webhook came for a job the pipeline had recovered without it.
    late_webhook_at: float | None = None
    # Consecutive failed API calls for this job (5xx, timeouts, 404s of a proven job), and
    # when the streak began: set while the job is "sick", cleared by any answer of its state.
    failures: int = 0
    failing_since: float | None = None
    # How many times the job was reopened, and the delivery ids that moved the row (evidence
    # already used: a replay of one of them moves nothing).
    reopens: int = 0
    seen_deliveries: frozenset[str] = frozenset()

    @property
    def is_done(self) -> bool:
        """The job reached its one outcome."""
        return self.state is JobState.DONE

    @property
    def reopenable(self) -> bool:
        """Closed for a reason that evidence of a settled job overturns."""
        return (
            self.state is JobState.DONE
            and self.outcome is Outcome.DEAD_LETTERED
            and self.detail.get("reason") in REOPENABLE_REASONS
        )

    def lease_expired(self, now: float) -> bool:
        """A PROCESSING row whose holder may have died."""
        return self.state is JobState.PROCESSING and (self.lease_until or 0.0) < now


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float) -> dict[str, str]:
    # Fixed milliseconds: DynamoDB numbers are decimal strings; repr of a float is not stable.
    return {"N": f"{value:.3f}" if isinstance(value, float) else str(value)}


def _string_set(value: str) -> dict[str, list[str]]:
    """``value`` as a DynamoDB string set of one, for ADD and DELETE (``struck_by``, the
    deliveries seen)."""
    return {"SS": [value]}


def _row(item: Mapping[str, Any]) -> LedgerRow:
    def s(name: str) -> str | None:
        value = item.get(name)
        return value["S"] if value and "S" in value else None

    def n(name: str) -> float | None:
        value = item.get(name)
        return float(value["N"]) if value and "N" in value else None

    outcome = s("outcome")
    detail = item.get("detail", {}).get("M", {})
    return LedgerRow(
        key=JobKey.from_pk(s(PARTITION_KEY) or ""),
        state=JobState(s("state") or JobState.RECEIVED),
        state_since=n(STATE_SINCE) or 0.0,
        created_at=n("created_at") or 0.0,
        source=s("source") or "",
        attempts=int(n("attempts") or 0),
        releases=int(n("releases") or 0),
        outcome=Outcome(outcome) if outcome else None,
        lease_owner=s("lease_owner"),
        lease_until=n("lease_until"),
        token=s("token"),
        detail={k: v.get("S", "") for k, v in detail.items()},
        finished_at=n("finished_at"),
        # Rows written before strikes were a set kept a number in ``strikes``: ignored, so such
        # a row's earlier strikes are forgotten once (a poison job gets a few more attempts).
        strikes=len(item.get(STRUCK_BY, {}).get("SS", [])),
        not_found=int(n("not_found") or 0),
        last_error=s("last_error"),
        next_page=int(n("next_page") or 1),
        next_item=int(n("next_item") or 0),
        items_stored=int(n("items_stored") or 0),
        items_failed=int(n("items_failed") or 0),
        page_seconds=n("page_seconds") or 0.0,
        expires_at=n(TTL_ATTRIBUTE),
        job_created_at=n("job_created_at"),
        late_webhook_at=n("late_webhook_at"),
        failures=int(n("failures") or 0),
        failing_since=n("failing_since"),
        reopens=int(n(REOPENS) or 0),
        seen_deliveries=frozenset(item.get(SEEN_DELIVERIES, {}).get("SS", [])),
    )
