"""Typed webhook answers: a subscription, and one attempt of its delivery log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Self

from scrape_pipeline.geonode.fields import REQUIRED, Answer, api, as_int, of_type, parse_time


@dataclass(frozen=True)
class Webhook(Answer):
    """A webhook subscription; ``secret`` is set only on create (and never shown in repr)."""

    id: str = api(str, default=REQUIRED)
    url: str = api(str, default="")
    event_type: str = api(str, default="")
    is_active: bool = api(bool, default=True)
    description: str | None = api()
    created_at: datetime | None = api(parse_time)
    updated_at: datetime | None = api(parse_time)
    secret: str | None = field(default=None, repr=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Self:
        """Read a subscription; its ``secret`` stays out of ``raw`` (which is logged)."""
        raw = dict(body)
        secret = raw.pop("secret", None)
        return replace(super().from_api(raw), secret=secret)


@dataclass(frozen=True)
class Delivery(Answer):
    """One delivery attempt from a subscription's delivery log."""

    id: str = api(str, default="")
    event_type: str = api(str, default="")
    job_id: str = api(str, default="")
    attempt_number: int = api(lambda v: as_int(v, 1))
    status: str = api(str, default="")
    http_status: int | None = api(lambda v: of_type(v, int))
    delivered_at: datetime | None = api(parse_time)
    created_at: datetime | None = api(parse_time)
