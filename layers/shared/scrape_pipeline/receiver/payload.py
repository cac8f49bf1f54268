"""A delivery's job id, event and kind, read from the signed body only (never a header: with
only the body signed, an unsigned header could re-key a capture into a new job)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.config.settings import FromEnv, Kind, Setting
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKind, is_job_id
from scrape_pipeline.receiver.signatures.secret import first_broken

EVENT_KINDS: Mapping[str, JobKind] = {
    "extract_completed": JobKind.EXTRACT,
    "batch_completed": JobKind.BATCH,
    "crawl_completed": JobKind.CRAWL,
}
TEST_EVENT = "ping"  # our test delivery (``scrape-pipeline doctor``): answered, never recorded


class PayloadError(PipelineError, ValueError):
    """The delivery is not a usable job notification (answered 400); the message says why."""


@dataclass(frozen=True)
class FieldLocations(FromEnv):
    """Dotted paths tried in order; the first present value wins. The defaults are the
    contract's envelope, then the seed article's flat fields (the real payload is unpublished)."""

    job_id: Sequence[str] = Setting(
        "JOB_ID_FIELDS",
        ("data.job_id", "job_id"),
        "where the job id is in the payload: the contract's envelope, then the seed article's "
        "flat field",
        Kind.LIST,
    ).field()
    event: Sequence[str] = Setting(
        "EVENT_FIELDS",
        ("event", "event_type"),
        "where the event is, which names the job's kind. Read from the signed body only: "
        "`X-Webhook-Event` is unsigned, and a body without an event is a 400",
        Kind.LIST,
    ).field()
    delivery_id: Sequence[str] = Setting(
        "DELIVERY_ID_FIELDS",
        ("delivery_id", "id"),
        "the attempt's id (kept on the row as evidence seen: a delivery that created, reopened "
        "or woke a job never moves it again; one without an id only creates rows)",
        Kind.LIST,
    ).field()
    timestamp: Sequence[str] = Setting(
        "TIMESTAMP_FIELDS",
        ("timestamp",),
        "the attempt's time, which `WEBHOOK_MAX_AGE_SECONDS` judges",
        Kind.LIST,
    ).field()


@dataclass(frozen=True)
class Notification:
    """Which job, which attempt (None: unnamed), and when: ``stamp`` is the timestamp field as
    sent (None: absent), for ``freshness`` to judge; ``PayloadError`` when it names no job."""

    job_id: str
    event: str
    delivery_id: str | None = None
    stamp: object = None

    def __post_init__(self) -> None:
        if (problem := first_broken(self, _NOTIFICATION_RULES)) is not None:
            raise PayloadError(problem)

    @property
    def kind(self) -> JobKind:
        """The job's kind, which its event names: ``extract_completed``, an extract."""
        return EVENT_KINDS[self.event]


# What a notification must keep, in order; the first broken is the ``PayloadError``.
_NOTIFICATION_RULES: tuple[tuple[Callable[[Notification], bool], str], ...] = (
    (lambda n: n.job_id is None, "missing job id"),
    (lambda n: not is_job_id(n.job_id), "malformed job id"),
    # An event that is not text names nothing: as good as none.
    (lambda n: not isinstance(n.event, str) or not n.event, "missing event type"),
    (lambda n: n.event not in EVENT_KINDS, "unknown event type"),
    # Ids shaped like the API's own: what a ledger row can keep as evidence it has seen.
    (lambda n: n.delivery_id is not None and not is_job_id(n.delivery_id), "malformed delivery id"),
)


@dataclass(frozen=True)
class TestEvent:
    """A signed test delivery (``TEST_EVENT``): answered, never recorded."""

    __test__ = False  # not a pytest test class, whatever its name

    event: str = TEST_EVENT
    stamp: object = None


def _first(document: Mapping[str, Any], paths: Sequence[str]) -> Any:
    """The value at the first dotted path present (a JSON null is absent)."""
    for path in paths:
        node: Any = document
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            return node
    return None


def read_notification(document: Any, locations: FieldLocations) -> Notification:
    """The job a parsed delivery is about; ``PayloadError`` says what is wrong with it."""
    if not isinstance(document, Mapping):
        raise PayloadError("body must be a JSON object")
    read = (locations.job_id, locations.event, locations.delivery_id, locations.timestamp)
    return Notification(*(_first(document, paths) for paths in read))


def _load(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting that would blow the stack
        raise PayloadError("body is not JSON") from None


def parse_delivery(body: bytes, locations: FieldLocations) -> Notification | TestEvent:
    """A delivery's raw body: a job notification, or a test event; ``PayloadError`` otherwise."""
    document = _load(body)
    if isinstance(document, Mapping) and _first(document, locations.event) == TEST_EVENT:
        return TestEvent(stamp=_first(document, locations.timestamp))
    return read_notification(document, locations)
