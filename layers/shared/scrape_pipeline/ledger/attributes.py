"""The ledger table's names, each written once: its attributes, its index, its key prefixes.

The template's key schema (``pk``), its GSI (``pending-by-state`` on ``pending_state`` and
``state_since``) and its TTL attribute (``expires_at``) are these (``tests/template`` pins
the template's, ``tests/ledger/test_ledger_items.py`` the items'). The other modules name an
attribute as ``Attr.X``, never as a string.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Attr(StrEnum):
    """An attribute of the ledger's items (a job's row unless said otherwise)."""

    PK = "pk"  # kind#job_id for a job; bookkeeping rows use their own prefixes
    KIND = "kind"
    JOB_ID = "job_id"
    STATE = "state"
    # The pending index's keys: set while a row is not DONE, so DONE rows leave the index.
    PENDING_STATE = "pending_state"
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
    # The lease and the attempts under it.
    LEASE_OWNER = "lease_owner"
    LEASE_UNTIL = "lease_until"
    ATTEMPTS = "attempts"
    STRUCK_BY = "struck_by"  # the owners of the attempts that hold a strike (a string set)
    RELEASES = "releases"
    LAST_ERROR = "last_error"
    NOT_FOUND = "not_found"
    FAILURES = "failures"
    FAILING_SINCE = "failing_since"
    # A batch's or crawl's storing progress.
    NEXT_PAGE = "next_page"
    NEXT_ITEM = "next_item"
    ITEMS_STORED = "items_stored"
    ITEMS_FAILED = "items_failed"
    ITEMS_CANCELLED = "items_cancelled"
    PAGE_SECONDS = "page_seconds"
    # A batch's or crawl's items resubmitted as extract jobs and not settled yet: a string set
    # of ``<item index>:<extract job id>`` (``scrape_pipeline.item_retries``); and the number
    # of pages once every page is stored, so settling those items needs no Geonode call.
    RETRYING_ITEMS = "retrying_items"
    # The indexes of the items whose retry is being posted: one a holder died in may exist.
    RETRY_POSTING = "retry_posting"
    # When a holder last began a POST for this row (a resubmission, an item's retry): until the
    # job list covers it (``scrape_pipeline.listing_lag``) a look-up that finds nothing proves
    # nothing, so no holder posts again before then.
    POSTED_AT = "posted_at"
    PAGES_STORED = "pages_stored"
    # An extract job that retries a batch's or crawl's item: ``<kind>#<job id>#<item index>``.
    RETRY_OF = "retry_of"
    # How it ended, and how often it came back.
    OUTCOME = "outcome"
    FINISHED_AT = "finished_at"
    REOPENS = "reopens"
    # The outbox: the outcome's event, set by the write that moves the row to DONE and
    # removed once the bus took it. ``outbox_at`` keys the sparse index of events not emitted.
    OUTBOX_AT = "outbox_at"
    OUTBOX_EVENT = "outbox_event"  # kept once emitted: a run linked later retells it
    # The submission run whose journal recorded the job (its events name it).
    RUN = "run"
    # A ``chain#`` bookkeeping row's one field.
    DEPTH = "depth"


PENDING_INDEX: Final = "pending-by-state"
# Sparse: only rows whose outcome's event the bus has not taken yet carry ``outbox_at``.
OUTBOX_INDEX: Final = "outbox-by-time"
# The names other code imports (the tests' fixtures, the benchmarks' stand-in rows).
PARTITION_KEY: Final = Attr.PK
STATE_SINCE: Final = Attr.STATE_SINCE
TTL_ATTRIBUTE: Final = Attr.EXPIRES_AT
# A run's head owes its Run Completed in the outbox index too (scrape_pipeline.runs.heads).
OUTBOX_AT: Final = Attr.OUTBOX_AT
OUTBOX_EVENT: Final = Attr.OUTBOX_EVENT


class RowPrefix(StrEnum):
    """The key prefixes of bookkeeping rows, which share the table (job keys are kind#id)."""

    URL = "url#"  # per-URL resubmission counters of earlier versions (no longer written)
    META = "meta#"  # the reconciler's watermark and checkpoints
    CHAIN = "chain#"  # how deep in its chain of resubmissions a job is
    RUN = "run#"  # submission runs' journals (scrape_pipeline.runs.dynamodb)


__all__ = (
    "OUTBOX_AT",
    "OUTBOX_EVENT",
    "OUTBOX_INDEX",
    "PARTITION_KEY",
    "PENDING_INDEX",
    "STATE_SINCE",
    "TTL_ATTRIBUTE",
    "Attr",
    "RowPrefix",
)
