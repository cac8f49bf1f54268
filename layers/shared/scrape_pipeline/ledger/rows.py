"""A job's row: the ``LedgerRow`` model and its marshalling to and from DynamoDB items.

Writing, each value is encoded by its type (``encode``); reading, each field of the row is
decoded from its attribute by the decoder a table gives it (``_DECODERS``), so an attribute a
row lacks (an older row, a field never set) reads as the field's default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Final

from scrape_pipeline.jobs import REOPENABLE_REASONS, JobKey, JobState, Outcome
from scrape_pipeline.ledger.attributes import Attr

# What the ledger stores: S (text), N (numbers), M of S (``detail``), SS (sets of ids).
type Value = str | int | float | Mapping[str, str] | Set[str]
# A DynamoDB attribute value as boto3's client takes and returns it: {"S": "..."}, {"N": ...}.
type Item = dict[str, Any]


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
    items_cancelled: int = 0
    # Items resubmitted as extract jobs, not settled yet (``<index>:<job id>``), and the page
    # count once every page is stored (0 before): ``scrape_pipeline.item_retries``.
    retrying_items: frozenset[str] = frozenset()
    # The items whose retry's POST began and has not been noted (the holder may have died).
    retry_posting: frozenset[str] = frozenset()
    # When a holder last began a POST for this row whose answer it may not have recorded.
    posted_at: float | None = None
    pages_stored: int = 0
    # For an extract job that retries an item: the item (``<kind>#<job id>#<index>``).
    retry_of: str | None = None
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
    # The submission run whose journal recorded the job, and the outcome's event as written.
    run: str | None = None
    outbox_event: str | None = field(default=None, repr=False)
    # When the outcome's event was written, while the bus has not taken it (None once sent,
    # or for a row settled without one): a run's Run Completed waits for it.
    outbox_at: float | None = None

    @property
    def is_done(self) -> bool:
        """The job reached its one outcome."""
        return self.state is JobState.DONE

    @property
    def items_retrying(self) -> int:
        """A batch's or crawl's items resubmitted as extract jobs and not settled yet."""
        return len(self.retrying_items)

    @property
    def reopenable(self) -> bool:
        """Closed for a reason that evidence of a settled job overturns."""
        return (
            self.state is JobState.DONE
            and self.outcome is Outcome.DEAD_LETTERED
            and self.detail.get("reason") in REOPENABLE_REASONS
        )

    def has_seen(self, delivery_id: str | None) -> bool:
        """``delivery_id`` already moved this row: evidence used up (None: no delivery)."""
        return delivery_id is not None and delivery_id in self.seen_deliveries

    def seen_with(self, delivery_id: str | None) -> frozenset[str]:
        """The deliveries seen once ``delivery_id`` (if any) has moved the row too."""
        return self.seen_deliveries | ({delivery_id} if delivery_id else set())

    def lease_expired(self, now: float) -> bool:
        """A PROCESSING row whose holder may have died."""
        return self.state is JobState.PROCESSING and (self.lease_until or 0.0) < now


def encode(value: Value) -> dict[str, Any]:
    """``value`` as a DynamoDB attribute value: text, a number, a map of text, a string set."""
    if isinstance(value, str):
        return {"S": str(value)}  # an enum's value, not the member
    if isinstance(value, float):
        # Fixed milliseconds: DynamoDB numbers are decimal strings; a float's repr is not stable.
        return {"N": f"{value:.3f}"}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, Mapping):
        return {"M": {k: {"S": v} for k, v in value.items()}}
    return {"SS": sorted(value)}


def to_item(values: Mapping[Attr, Value | None]) -> Item:
    """The item holding ``values``; an attribute whose value is None is left out."""
    return {attr.value: encode(value) for attr, value in values.items() if value is not None}


type _Decoder = Callable[[Mapping[str, Any]], Any]


def _text(value: Mapping[str, Any]) -> str | None:
    text: str | None = value.get("S")
    return text


def _number(value: Mapping[str, Any]) -> float | None:
    return float(value["N"]) if "N" in value else None


def _seconds(value: Mapping[str, Any]) -> float:
    return _number(value) or 0.0


def _count(default: int = 0) -> _Decoder:
    return lambda value: int(_number(value) or default)


def _members(value: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(value.get("SS", []))


def _key(value: Mapping[str, Any]) -> JobKey:
    return JobKey.from_pk(_text(value) or "")


def _state(value: Mapping[str, Any]) -> JobState:
    return JobState(_text(value) or JobState.RECEIVED)


def _outcome(value: Mapping[str, Any]) -> Outcome | None:
    text = _text(value)
    return Outcome(text) if text else None


def _source(value: Mapping[str, Any]) -> str:
    return _text(value) or ""


def _detail(value: Mapping[str, Any]) -> dict[str, str]:
    return {k: v.get("S", "") for k, v in value.get("M", {}).items()}


def _strikes(value: Mapping[str, Any]) -> int:
    # Rows written before strikes were a set kept a number in ``strikes``: ignored, so such a
    # row's earlier strikes are forgotten once (a poison job gets a few more attempts).
    return len(_members(value))


# How each attribute is read into the row's field of the same name (``_FIELD``: another).
_DECODERS: Final[Mapping[Attr, _Decoder]] = {
    Attr.PK: _key,
    Attr.STATE: _state,
    Attr.SOURCE: _source,
    Attr.OUTCOME: _outcome,
    Attr.DETAIL: _detail,
    Attr.STRUCK_BY: _strikes,
    Attr.SEEN_DELIVERIES: _members,
    Attr.RETRYING_ITEMS: _members,
    Attr.RETRY_POSTING: _members,
    Attr.NEXT_PAGE: _count(1),  # pages count from one
    **dict.fromkeys((Attr.STATE_SINCE, Attr.CREATED_AT, Attr.PAGE_SECONDS), _seconds),
    **dict.fromkeys((Attr.ATTEMPTS, Attr.RELEASES, Attr.NOT_FOUND, Attr.FAILURES), _count()),
    **dict.fromkeys((Attr.NEXT_ITEM, Attr.ITEMS_STORED, Attr.ITEMS_FAILED, Attr.REOPENS), _count()),
    **dict.fromkeys((Attr.ITEMS_CANCELLED, Attr.PAGES_STORED), _count()),
    # Times that a row may not have: None, not zero.
    **dict.fromkeys((Attr.LEASE_UNTIL, Attr.FINISHED_AT, Attr.EXPIRES_AT), _number),
    **dict.fromkeys((Attr.JOB_CREATED_AT, Attr.LATE_WEBHOOK_AT, Attr.FAILING_SINCE), _number),
    Attr.POSTED_AT: _number,
    Attr.OUTBOX_AT: _number,
    **dict.fromkeys(
        (Attr.LEASE_OWNER, Attr.TOKEN, Attr.LAST_ERROR, Attr.RUN, Attr.RETRY_OF), _text
    ),
    Attr.OUTBOX_EVENT: _text,
}
_FIELD: Final[Mapping[Attr, str]] = {Attr.PK: "key", Attr.STRUCK_BY: "strikes"}


def from_item(item: Mapping[str, Any]) -> LedgerRow:
    """The row an item holds, each field from its attribute (its default where it has none)."""
    fields = {
        _FIELD.get(attr, attr.value): decode(item.get(attr) or {})
        for attr, decode in _DECODERS.items()
    }
    return LedgerRow(**fields)


__all__ = ("Item", "LedgerRow", "Value", "encode", "from_item", "to_item")
