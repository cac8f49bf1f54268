"""Typed batch and crawl answers: counters, and a page of items (a URL of a batch, a page of a
crawl), read as leniently as ``models``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.geonode.fields import Answer, api, as_dict, int_or_none, objects, of_type
from scrape_pipeline.geonode.models import ApiStatus, Page, Settles, read_status


@dataclass(frozen=True)
class BatchItem(Settles, Answer):
    """One URL of a batch, or one page of a crawl."""

    input_index: int | None = api(lambda v: of_type(v, int))
    url: str | None = api()
    status: ApiStatus | str = api(read_status, default="")
    error_code: str | None = api()
    error_message: str | None = api()
    data: dict[str, Any] = api(as_dict)
    metadata: dict[str, Any] = api(as_dict)


@dataclass(frozen=True)
class BatchStatus(Settles):
    """A batch or crawl with its counters and one page of its items."""

    job_id: str
    status: ApiStatus | str
    counters: dict[str, int]
    page: Page[BatchItem]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any], *, page: int | None = None) -> BatchStatus:
        """``page``, the page asked for, numbers the answer over its echo (none echoed: 1)."""
        items = [BatchItem.from_api(i) for i in objects(body.get("items"))]
        job_id = body.get("job_id") or body.get("id")
        if not job_id:
            # As for an extract job: an answer that does not say which job it is is no answer.
            raise ValueError("batch or crawl answer without job_id")
        return cls(
            job_id=str(job_id),
            status=read_status(body.get("status", "")),
            counters=_counters(body),
            page=Page.from_api(body, items, page),
            raw=dict(body),
        )

    @property
    def tokens_charged(self) -> int | None:
        """What the whole batch or crawl has cost so far (``token_summary``), if it says."""
        return int_or_none(as_dict(self.raw.get("token_summary")).get("tokens_charged_total"))

    @property
    def pending(self) -> int:
        """Items the counters say are still pending (0 when they say nothing)."""
        return sum(n for name, n in self.counters.items() if name.startswith("pending_"))


def _counters(body: Mapping[str, Any]) -> dict[str, int]:
    """The ``*_urls`` (batch) or ``*_pages`` (crawl) counts of a paged answer."""
    return {k: v for k, v in body.items() if k.endswith(("_urls", "_pages")) and isinstance(v, int)}
