"""One page of a paged listing, numbered as the answer says (or as it was asked for)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.geonode.fields import as_int


@dataclass(frozen=True)
class Page[T]:
    """One page of a paged listing."""

    items: list[T]
    page: int
    page_size: int
    page_count: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_last(self) -> bool:
        """No page after this one."""
        return self.page >= self.page_count

    @classmethod
    def from_api(cls, body: Mapping[str, Any], items: list[T], page: int | None = None) -> Page[T]:
        """``items`` numbered as ``body`` says: ``page`` (the one asked for) over its echo."""
        return cls(
            items=items,
            page=page if page is not None else as_int(body.get("page"), 1),
            page_size=as_int(body.get("page_size"), len(items)),
            page_count=as_int(body.get("page_count"), 1),
            raw=dict(body),
        )
