"""Typed webhook answers: a subscription, and one attempt of its delivery log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scrape_pipeline.geonode.fields import as_int, of_type, parse_time


@dataclass(frozen=True)
class Webhook:
    """A webhook subscription; ``secret`` is set only on create (and never shown in repr)."""

    id: str
    url: str
    event_type: str
    is_active: bool
    description: str | None
    created_at: datetime | None
    updated_at: datetime | None
    secret: str | None = field(default=None, repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Webhook:
        """Read a subscription; its ``secret`` stays out of ``raw`` (which is logged)."""
        raw = dict(body)
        secret = raw.pop("secret", None)
        return cls(
            id=str(body["id"]),
            url=str(body.get("url", "")),
            event_type=str(body.get("event_type", "")),
            is_active=bool(body.get("is_active", True)),
            description=body.get("description"),
            created_at=parse_time(body.get("created_at")),
            updated_at=parse_time(body.get("updated_at")),
            secret=secret,
            raw=raw,
        )


@dataclass(frozen=True)
class Delivery:
    """One delivery attempt from a subscription's delivery log."""

    id: str
    event_type: str
    job_id: str
    attempt_number: int
    status: str
    http_status: int | None
    delivered_at: datetime | None
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        return self.http_status is not None and 200 <= self.http_status < 300

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Delivery:
        return cls(
            id=str(body.get("id", "")),
            event_type=str(body.get("event_type", "")),
            job_id=str(body.get("job_id", "")),
            attempt_number=as_int(body.get("attempt_number"), 1),
            status=str(body.get("status", "")),
            http_status=of_type(body.get("http_status"), int),
            delivered_at=parse_time(body.get("delivered_at")),
            created_at=parse_time(body.get("created_at")),
            raw=dict(body),
        )
