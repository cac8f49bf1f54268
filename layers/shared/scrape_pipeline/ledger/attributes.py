"""The ledger table's names, each written once: its attributes, indexes and key prefixes."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Attr(StrEnum):
    """An attribute of the ledger's items (a job's row unless said otherwise)."""

    PK = "pk"  # kind#job_id for a job; bookkeeping rows use their own prefixes
    KIND = "kind"
    JOB_ID = "job_id"
    STATE = "state"
    PENDING_STATE = "pending_state"  # with STATE_SINCE, the pending index's keys (not DONE)
    STATE_SINCE = "state_since"
    CREATED_AT = "created_at"
    UPDATED_AT = "updated_at"
    EXPIRES_AT = "expires_at"  # the TTL: pushed by every write
    SOURCE = "source"
    TOKEN = "token"  # noqa: S105 - a row's undo token, not a secret: its writer's own
    DETAIL = "detail"
    JOB_CREATED_AT = "job_created_at"
    SEEN_DELIVERIES = "seen_deliveries"
    LATE_WEBHOOK_AT = "late_webhook_at"
    LEASE_OWNER = "lease_owner"
    LEASE_UNTIL = "lease_until"
    ATTEMPTS = "attempts"
    STRUCK_BY = "struck_by"  # the owners of the attempts that hold a strike (a string set)
    RELEASES = "releases"
    LAST_ERROR = "last_error"
    NOT_FOUND = "not_found"
    FAILURES = "failures"
    FAILING_SINCE = "failing_since"
    NEXT_PAGE = "next_page"
    NEXT_ITEM = "next_item"
    ITEMS_STORED = "items_stored"
    ITEMS_FAILED = "items_failed"
    ITEMS_CANCELLED = "items_cancelled"
    PAGE_SECONDS = "page_seconds"
    RETRYING_ITEMS = "retrying_items"  # ``<item index>:<extract job id>`` (``resubmission``)
    RETRY_POSTING = "retry_posting"  # the items whose retry's POST is under way
    POSTED_AT = "posted_at"
    PAGES_STORED = "pages_stored"
    RETRY_OF = "retry_of"  # an extract job that retries an item: ``<kind>#<job id>#<index>``
    OUTCOME = "outcome"
    FINISHED_AT = "finished_at"
    REOPENS = "reopens"
    # The outcome's event, written with the DONE; ``outbox_at`` (the sparse index's key) goes
    # once the bus took it.
    OUTBOX_AT = "outbox_at"
    OUTBOX_EVENT = "outbox_event"
    RUN = "run"  # the submission run whose journal recorded the job (its events name it)
    DEPTH = "depth"  # a ``chain#`` bookkeeping row's one field


PENDING_INDEX: Final = "pending-by-state"
OUTBOX_INDEX: Final = "outbox-by-time"  # a run's head owes its Run Completed there too


class RowPrefix(StrEnum):
    """The key prefixes of bookkeeping rows, which share the table (job keys are kind#id)."""

    URL = "url#"  # per-URL resubmission counters of earlier versions (no longer written)
    META = "meta#"  # the reconciler's watermark and checkpoints
    CHAIN = "chain#"  # how deep in its chain of resubmissions a job is
    RUN = "run#"  # submission runs' journals (scrape_pipeline.runs.dynamodb)
