"""What became of one job (or one batch or crawl item): the API's status against the bucket.

The bucket is read first: a ``metadata.json`` there means stored (written last, so the result
is whole), unless a file it needs is gone or an object has a second version; a live
dead-letter record means dead-lettered. Only then does the API's status explain the absence:
cancelled, still running, settled moments ago (within the grace, nothing of it deleted),
failed and replaced by a later job of the same URL, or else missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from scrape_pipeline.geonode.models import TERMINAL_STATUSES, ApiStatus
from scrape_pipeline.jobs import JobKind
from scrape_pipeline_ops.audit.objects import KeyHistory, Where

METADATA: Final = "metadata.json"


class Verdict(StrEnum):
    """The audit's word for one job."""

    STORED = "stored"  # every object there, each written once
    DEAD_LETTERED = "dead_lettered"  # a live dead-letter record says why
    CANCELLED = "cancelled"  # the API cancelled it: nothing to store
    RUNNING = "running"  # the API has not settled it yet
    SETTLING = "settling"  # settled within the grace: the pipeline may still be storing it
    RESUBMITTED = "resubmitted"  # failed; a later job of the same URL in the window replaced it
    DOUBLED = "doubled"  # stored, but an object has more than one version
    MISSING = "missing"  # settled, and neither stored nor dead-lettered


FAILING: Final = frozenset({Verdict.MISSING, Verdict.DOUBLED})


@dataclass(frozen=True)
class Subject:
    """A job as the API reports it; ``status`` None when the API does not know it (404)."""

    kind: JobKind
    job_id: str
    status: ApiStatus | str | None
    item: int | None = None
    url: str | None = None
    created_at: float | None = None
    settled_at: float | None = None
    files: tuple[str, ...] = ()  # content files the job's formats call for, when known

    @property
    def where(self) -> Where:
        """Its key in a ``Listing``."""
        return (self.kind, self.job_id, self.item)

    def label(self) -> str:
        """``extract 1234`` or ``batch 1234 item 7``, for messages."""
        item = "" if self.item is None else f" item {self.item}"
        return f"{self.kind.value} {self.job_id}{item}"


@dataclass(frozen=True)
class Finding:
    """One subject's verdict and why (``reason``: a dead letter's)."""

    subject: Subject
    verdict: Verdict
    why: str = ""
    reason: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


def judge(
    subject: Subject,
    files: Mapping[str, KeyHistory],
    dead_letter: KeyHistory | None,
    *,
    now: float,
    grace_s: float,
    replaced: bool = False,
) -> Finding:
    """The verdict on ``subject`` from its result files and dead-letter record.

    ``replaced``: a later job of the same URL is in the window (a failed job resubmitted).
    """
    gone = sorted(name for name, history in files.items() if not history.live)
    metadata = files.get(METADATA)
    if metadata is not None and metadata.live:
        lacking = [f for f in subject.files if f not in files] + gone
        if lacking:
            return Finding(subject, Verdict.MISSING, f"{', '.join(lacking)} not there")
        doubled = {name: h.versions for name, h in files.items() if h.versions > 1}
        if doubled:
            said = ", ".join(f"{name} has {n} versions" for name, n in sorted(doubled.items()))
            return Finding(subject, Verdict.DOUBLED, said)
        return Finding(subject, Verdict.STORED)
    if dead_letter is not None and dead_letter.live:
        return Finding(subject, Verdict.DEAD_LETTERED)
    status = subject.status
    if status == ApiStatus.CANCELLED:
        return Finding(subject, Verdict.CANCELLED)
    if status is not None and status not in TERMINAL_STATUSES:
        return Finding(subject, Verdict.RUNNING, str(status))
    # Settled moments ago, nothing deleted: the processor may be writing it (an object deleted
    # was stored once, so it is missing whatever the time).
    age = None if subject.settled_at is None else now - subject.settled_at
    if status is not None and age is not None and age < grace_s and not gone:
        return Finding(subject, Verdict.SETTLING, f"{status} {age:.0f} s ago")
    if status == ApiStatus.FAILED and replaced:
        return Finding(subject, Verdict.RESUBMITTED, "a later job of its URL replaced it")
    return Finding(subject, Verdict.MISSING, _absence(status, gone, dead_letter))


def _absence(
    status: ApiStatus | str | None, gone: list[str], dead_letter: KeyHistory | None
) -> str:
    """Why nothing speaks for a settled job, in a few words."""
    said = "unknown to the API" if status is None else f"{status} in the API"
    if status == ApiStatus.FAILED or status is None:
        said += ", no dead-letter record"
    else:
        said += f", no {METADATA}"
    if gone:
        said += f" ({', '.join(gone)} deleted)"
    elif dead_letter is not None:
        said += " (its dead-letter record deleted)"
    return said
