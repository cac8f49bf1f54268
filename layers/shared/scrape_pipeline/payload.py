"""Reading a delivery's job id, event and job kind from configurable field locations.

Defaults follow the contract's envelope (``event``, ``data.job_id``) and fall back to the
seed article's flat fields (``event_type``, ``job_id``): the real payload is unpublished.

A test delivery is ours, not Geonode's (the contract has no ping event): the event ``ping``,
in the envelope or the ``X-Webhook-Event`` header, e.g. ``{"event": "ping", "delivery_id":
"doctor-...", "timestamp": "...", "data": {}}``. ``scrape-pipeline doctor`` sends one, signed
like a real delivery; the receiver answers it after verifying the signature and records
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKind, is_job_id
from scrape_pipeline.settings import read_list

EVENT_KINDS: Mapping[str, JobKind] = {
    "extract_completed": JobKind.EXTRACT,
    "batch_completed": JobKind.BATCH,
    "crawl_completed": JobKind.CRAWL,
}


TEST_EVENT = "ping"


class PayloadError(PipelineError, ValueError):
    """The delivery is not a usable job notification (answered 400); the message says why."""


@dataclass(frozen=True)
class FieldLocations:
    """Dotted paths tried in order; the first present value wins."""

    job_id: Sequence[str] = ("data.job_id", "job_id")
    event: Sequence[str] = ("event", "event_type")
    # Empty: the kind follows from the event name (extract_completed -> extract).
    kind: Sequence[str] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FieldLocations:
        """``JOB_ID_FIELDS``, ``EVENT_FIELDS``, ``JOB_KIND_FIELDS``: comma-separated paths."""
        return cls(
            job_id=read_list(env, "JOB_ID_FIELDS", cls.job_id),
            event=read_list(env, "EVENT_FIELDS", cls.event),
            kind=read_list(env, "JOB_KIND_FIELDS", cls.kind),
        )


@dataclass(frozen=True)
class Notification:
    """What the receiver needs from a delivery: which job, and of what kind."""

    kind: JobKind
    job_id: str
    event: str


@dataclass(frozen=True)
class TestEvent:
    """A signed test delivery (``TEST_EVENT``): answered, never recorded."""

    __test__ = False  # not a pytest test class, whatever its name

    event: str = TEST_EVENT


def _lookup(document: Mapping[str, Any], path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _first(document: Mapping[str, Any], paths: Sequence[str]) -> Any:
    for path in paths:
        value = _lookup(document, path)
        if value is not None:
            return value
    return None


def read_notification(
    document: Any, locations: FieldLocations, event_header: str | None = None
) -> Notification:
    """The job a parsed delivery is about; ``PayloadError`` says what is wrong with it."""
    if not isinstance(document, Mapping):
        raise PayloadError("body must be a JSON object")
    job_id = _first(document, locations.job_id)
    if job_id is None:
        raise PayloadError("missing job id")
    if not is_job_id(job_id):
        raise PayloadError("malformed job id")
    event = _first(document, locations.event) or event_header
    if not isinstance(event, str) or not event:
        raise PayloadError("missing event type")
    kind_value = _first(document, locations.kind) if locations.kind else None
    if kind_value is not None:
        try:
            kind = JobKind(kind_value)
        except ValueError:
            raise PayloadError("unknown job kind") from None
    elif event in EVENT_KINDS:
        kind = EVENT_KINDS[event]
    else:
        raise PayloadError("unknown event type")
    return Notification(kind=kind, job_id=job_id, event=event)


def parse_notification(
    body: bytes, locations: FieldLocations, event_header: str | None = None
) -> Notification:
    """The job a delivery's raw body is about; ``PayloadError`` when it is not JSON or not one."""
    return read_notification(_load(body), locations, event_header)


def _load(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting that would blow the stack
        raise PayloadError("body is not JSON") from None


def parse_delivery(
    body: bytes, locations: FieldLocations, event_header: str | None = None
) -> Notification | TestEvent:
    """A delivery's raw body: a job notification, or a test event; ``PayloadError`` otherwise."""
    document = _load(body)
    if isinstance(document, Mapping):
        event = _first(document, locations.event) or event_header
        if event == TEST_EVENT:
            return TestEvent()
    return read_notification(document, locations, event_header)
