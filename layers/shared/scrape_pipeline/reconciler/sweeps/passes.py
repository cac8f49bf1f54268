"""Resumable passes over a list the API serves newest first: the checkpoint codec, and the two
questions every such list shares (where it ends, when an entry was created)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.geonode.models import JobSummary, Page
from scrape_pipeline.geonode.webhooks import Delivery

# The sweep's bookkeeping field holding its passes cut short: one JSON list, oldest first.
PENDING = "pending"

Raw = Sequence[Any]  # [start, end, page], or with [null, lag_from] after it


@dataclass(frozen=True)
class SavedPass:
    """A pass cut short: its range and the next page to read."""

    start: float
    end: float
    page: int = 1
    lag_from: float | None = (
        None  # the job list's re-read ranges (see ``scrape_pipeline.reconciler.sweeps.job_list``)
    )

    def encode(self) -> list[float | int | None]:
        """``[start, end, page]``, or ``[start, end, page, null, lag_from]`` for a re-read range."""
        out: list[float | int | None] = [round(self.start, 3), round(self.end, 3), self.page]
        return out if self.lag_from is None else [*out, None, round(self.lag_from, 3)]

    @classmethod
    def decode(cls, raw: Raw) -> SavedPass:
        """From its JSON form."""
        start, end, page, _, lag_from = (*raw, None, None)[:5]
        return cls(
            float(start), float(end), int(page), None if lag_from is None else float(lag_from)
        )


def decode(saved: Mapping[str, str]) -> list[SavedPass]:
    """The passes ``saved`` holds, oldest first."""
    return [SavedPass.decode(raw) for raw in json.loads(saved.get(PENDING) or "[]")]


def encode(passes: Iterable[SavedPass]) -> dict[str, str]:
    """The ``pending`` field for ``passes``; none when there are none."""
    listed = [p.encode() for p in passes]
    return {PENDING: json.dumps(listed, separators=(",", ":"))} if listed else {}


def ends(page: Page[Any]) -> bool:
    """A listing read newest first ends at ``page``: the API says it is the last, or it is empty."""
    return page.is_last or not page.items


def created(entry: JobSummary | Delivery, missing: float) -> float:
    """When ``entry`` was created; one listed without its time counts as created at ``missing``."""
    return entry.created_at.timestamp() if entry.created_at else missing
