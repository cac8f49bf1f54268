"""One attempt at a job under its lease: what every step after the lease is granted needs."""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.processor.deadline import Deadline


@dataclass(frozen=True)
class Attempt:
    """The job, the lease's owner id, its row as the lease returned it, and the deadline."""

    key: JobKey
    owner: str
    row: LedgerRow
    deadline: Deadline | None = None
    # Woken by the watch sweep: a job that still runs goes back to sleep at once.
    woken: bool = False


class OutOfTimeError(PipelineError):
    """A batch or crawl stopped at a page boundary (or inside a page, after an item): what
    comes next would not fit before the deadline. Its progress is checkpointed."""
