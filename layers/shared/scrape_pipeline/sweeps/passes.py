"""The resumable pass's checkpoint codec: passes cut short, saved in one bookkeeping field.

A pass is a range of a list the API serves newest first (the job list, one subscription's
delivery log), read page by page; cut short, it is saved with the page the next run reads
first. Saved passes are one JSON list in the ``pending`` field of the sweep's bookkeeping row,
oldest first, each ``[start, end, page]``, or ``[start, end, page, null, lag_from]`` for a range
the job list reads again for jobs listed late (the null keeps the place of a field earlier
versions wrote there). Rows of earlier versions read through ``migrate``, one function.

Every list read newest first (the watch sweep's listing too) shares ``ends`` (its last page)
and ``created`` (an entry's time, the range's bound when the API leaves it out).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scrape_pipeline.geonode.models import Delivery, JobSummary, Page

PENDING = "pending"
# Earlier versions' single resumable pass, by field: the job list's (``resume_oldest``, the
# pinning job's time, went with it) and the delivery log's.
_OLD_SINGLE_PASSES = (
    ("resume_start", "resume_end", "resume_page", ("resume_oldest",)),
    ("pass_low", "pass_high", "pass_page", ()),
)

Raw = Sequence[float | int | None]


@dataclass(frozen=True)
class SavedPass:
    """A pass cut short: its range and the next page to read."""

    start: float
    end: float
    page: int = 1
    lag_from: float | None = None  # the job list's re-read ranges (see ``scrape_pipeline.joblist``)

    def encode(self) -> list[float | int | None]:
        """Its JSON form."""
        out: list[float | int | None] = [round(self.start, 3), round(self.end, 3), self.page]
        return out if self.lag_from is None else [*out, None, round(self.lag_from, 3)]

    @classmethod
    def decode(cls, raw: Raw) -> SavedPass:
        """From its JSON form; a fourth field (the pinning job of earlier versions) is ignored."""
        # Padded: ``[start, end, page]``, or with the re-read range's two fields after it.
        start, end, page, _, lag_from = (*raw, None, None)[:5]
        lag = None if lag_from is None else float(lag_from)
        return cls(float(start or 0.0), float(end or 0.0), int(page or 1), lag)


def migrate(saved: Mapping[str, str]) -> dict[str, str]:
    """``saved`` in today's format: an earlier version's single resumable pass (the job list's
    ``resume_*`` fields, the delivery log's ``pass_*``) joins the pending list, newest last."""
    out = dict(saved)
    pending = json.loads(out.get(PENDING) or "[]")
    for start, end, page, dropped in _OLD_SINGLE_PASSES:
        fields = (out.pop(start, ""), out.pop(end, ""), out.pop(page, ""))
        for name in dropped:
            out.pop(name, None)
        if fields[2]:
            pending.append([float(fields[0]), float(fields[1]), int(fields[2])])
    if pending:
        out[PENDING] = json.dumps(pending, separators=(",", ":"))
    return out


def decode(saved: Mapping[str, str]) -> list[SavedPass]:
    """The passes ``saved`` holds, oldest first (rows of earlier versions too)."""
    return [SavedPass.decode(raw) for raw in json.loads(migrate(saved).get(PENDING) or "[]")]


def encode(passes: Iterable[SavedPass]) -> dict[str, str]:
    """The ``pending`` field for ``passes``; none when there are none."""
    listed = [p.encode() for p in passes]
    return {PENDING: json.dumps(listed, separators=(",", ":"))} if listed else {}


def ends(page: Page[Any]) -> bool:
    """A listing read newest first ends at ``page``: the API says it is the last, or it is empty."""
    return page.is_last or not page.items


def created(entry: JobSummary | Delivery, missing: float) -> float:
    """When ``entry`` was created; one listed without its time counts as created at
    ``missing`` (the bound of the range read, so inside it)."""
    return entry.created_at.timestamp() if entry.created_at else missing
