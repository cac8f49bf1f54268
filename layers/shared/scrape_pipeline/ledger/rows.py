"""A job's row: ``LedgerRow`` and its marshalling by boto3's type codec; an attribute a row
lacks reads as its field's default."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import MISSING, Field, dataclass, field, fields
from decimal import Decimal
from typing import Any, Final

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from scrape_pipeline.jobs import REOPENABLE_REASONS, JobKey, JobState, Outcome
from scrape_pipeline.ledger.attributes import Attr

# What the ledger stores: S (text), N (numbers), M of S (``detail``), SS (sets of ids).
type Value = str | int | float | Mapping[str, str] | Set[str]
# A DynamoDB item as boto3's client takes and returns it: {"S": "..."}, {"N": ...}.
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
    # A batch's or crawl's storing progress: the next page (and item of it) and items done.
    next_page: int = 1
    next_item: int = 0
    items_stored: int = 0
    items_failed: int = 0
    items_cancelled: int = 0
    # Items retried as extract jobs and not settled (``<index>:<job id>``), those whose POST
    # began unnoted, and the page count once every page is stored (``resubmission``).
    retrying_items: frozenset[str] = frozenset()
    retry_posting: frozenset[str] = frozenset()
    posted_at: float | None = None
    pages_stored: int = 0
    retry_of: str | None = None  # an item's retry: ``<kind>#<job id>#<index>``
    # The longest page the last attempt took: the next attempt's estimate of its first page.
    page_seconds: float = 0.0
    expires_at: float | None = None
    job_created_at: float | None = None  # API time, kept for WATCHING rows
    late_webhook_at: float | None = None
    # Consecutive failed API calls for the job, since when: cleared by any answer of its state.
    failures: int = 0
    failing_since: float | None = None
    reopens: int = 0
    seen_deliveries: frozenset[str] = frozenset()  # a replay of one of these moves nothing
    run: str | None = None
    outbox_event: str | None = field(default=None, repr=False)
    outbox_at: float | None = None  # set while the bus has not taken the event

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

    def lease_expired(self, now: float) -> bool:
        """A PROCESSING row whose holder may have died."""
        return self.state is JobState.PROCESSING and (self.lease_until or 0.0) < now


_SERIALIZER: Final = TypeSerializer()
_DESERIALIZER: Final = TypeDeserializer()


def encode(value: Value) -> dict[str, Any]:
    """``value`` as a DynamoDB attribute value: text, a number, a map of text, a string set."""
    if isinstance(value, Set):
        return {"SS": sorted(value)}
    return dict(_SERIALIZER.serialize(_plain(value)))


def _plain(value: object) -> object:
    """What boto3's serializer takes: an enum's value, not the member; a float to the
    millisecond (a float's repr is not a stable decimal)."""
    if isinstance(value, float):
        return Decimal(f"{value:.3f}")
    return str(value) if isinstance(value, str) else value


def to_item(values: Mapping[Attr, Value | None]) -> Item:
    """The item holding ``values``; an attribute whose value is None is left out."""
    return {attr.value: encode(value) for attr, value in values.items() if value is not None}


# How a present attribute (boto3-decoded) is read, by its field's type (or its name).
_BY_TYPE: Final[Mapping[str, Callable[[Any], Any]]] = {
    "JobKey": JobKey.from_pk,
    "JobState": JobState,
    "Outcome | None": lambda value: Outcome(value) if value else None,
    "str": str,
    "str | None": str,
    "float": float,
    "float | None": float,
    "int": int,
    "frozenset[str]": frozenset,
    "dict[str, str]": lambda value: {k: str(v) for k, v in value.items()},
    "strikes": len,  # the attempts that hold one (struck_by, a set)
}
# Fields read from an attribute of another name.
_ATTRIBUTE: Final = {"key": Attr.PK.value, "strikes": Attr.STRUCK_BY.value}
# What a field without a default reads as where its attribute is missing.
_MISSING: Final[Mapping[str, Callable[[], Any]]] = {
    "JobKey": lambda: JobKey.from_pk(""),
    "JobState": lambda: JobState.RECEIVED,
    "float": float,
    "str": str,
    "dict[str, str]": dict,
}


def from_item(item: Mapping[str, Any]) -> LedgerRow:
    """The row an item holds, each field from its attribute (its default where it has none)."""
    values = {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}
    return LedgerRow(**{spec.name: _decoded(spec, values) for spec in fields(LedgerRow)})


def _decoded(spec: Field[Any], values: Mapping[str, object]) -> Any:
    """A field's value read from its attribute's; its default where there is none."""
    value = values.get(_ATTRIBUTE.get(spec.name, spec.name))
    if value is not None:
        return _BY_TYPE.get(spec.name, _BY_TYPE[str(spec.type)])(value)
    return _MISSING[str(spec.type)]() if spec.default is MISSING else spec.default


__all__ = ("Item", "LedgerRow", "Value", "encode", "from_item", "to_item")
