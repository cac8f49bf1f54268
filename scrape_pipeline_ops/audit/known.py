"""Which jobs the pipeline's own records name for a window: the batches and crawls the ledger
and the runs journal know (the API lists extract jobs only), and a run's jobs for ``--run``.

These records only say where to look: every verdict is the API's status against the bucket.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.runs.journal import DEFAULT_LEASE_S, Entry
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import Run, RunMode
from scrape_pipeline_ops.ledger import created_since

if TYPE_CHECKING:
    from scrape_pipeline.ledger.full import Ledger

CONTAINERS: Final = (JobKind.BATCH, JobKind.CRAWL)
# How late the API may list a job, at most: rows the ledger wrote this long after a window's
# end may be of its jobs (4.5 minutes measured in the listing-lag chaos profile; twice that).
LISTED_LATE_S: Final = 600.0


class RunJournal(Protocol):
    """What is read of a runs journal (``SqliteJournal`` and ``TableJournal`` both are one)."""

    def run(self, name: str) -> Run | None: ...

    def runs(self) -> list[Run]: ...

    def entries(self, name: str, states: Collection[EntryState] = ()) -> list[Entry]: ...


@dataclass
class Known:
    """Batch and crawl ids to read from the API, and, for one run, its extract job ids."""

    containers: dict[tuple[JobKind, str], None] = field(default_factory=dict)
    extracts: dict[str, None] | None = None  # None: every extract of the window
    # Extracts the ledger noted in the window: read one by one if the job list does not show
    # them yet (the API lists a job minutes after its creation, sometimes more).
    noted: dict[str, None] = field(default_factory=dict)

    @property
    def for_run(self) -> bool:
        """One run's jobs (``of_run``), not a whole window's."""
        return self.extracts is not None

    def add(self, kind: JobKind, job_id: str) -> None:
        """Name one batch or crawl (once)."""
        self.containers.setdefault((kind, job_id), None)


def _submitted(journal: RunJournal, run: Run, since: float, until: float) -> list[Entry]:
    """A run's submitted entries whose POST may have created its job in the window (a POST is
    claimed at most a lease before the job is created)."""
    return [
        e
        for e in journal.entries(run.name, (EntryState.SUBMITTED,))
        if e.job_id and (e.posted_at is None or since - DEFAULT_LEASE_S <= e.posted_at <= until)
    ]


def of_run(journal: RunJournal, run: Run, since: float, until: float) -> Known:
    """The jobs of one run (``--run``): its extracts, or its batches or crawls."""
    known = Known(extracts={} if run.mode is RunMode.ASYNC else None)
    for entry in _submitted(journal, run, since, until):
        assert entry.job_id is not None
        if known.extracts is not None:
            known.extracts.setdefault(entry.job_id, None)
        else:
            known.add(JobKind(run.mode.kind), entry.job_id)
    if known.extracts is None:
        known.extracts = {}  # a batch or crawl run made no extract job
    return known


def of_window(
    since: float,
    until: float,
    *,
    journal: RunJournal | None = None,
    ledger: Ledger | None = None,
) -> Known:
    """Every batch and crawl the journal's runs or the ledger's rows place near the window."""
    known = Known()
    if journal is not None:
        for run in journal.runs():
            if run.mode is RunMode.ASYNC or run.created_at > until:
                continue
            for entry in _submitted(journal, run, since, until):
                assert entry.job_id is not None
                known.add(JobKind(run.mode.kind), entry.job_id)
    if ledger is not None:
        for kind in CONTAINERS:
            for job_id in created_since(ledger, kind, since):
                known.add(kind, job_id)
        # A row is written once its job settles (or its run posts it): after the job's
        # creation, and within the listing lag of the window's end for any the list lacks.
        noted = created_since(ledger, JobKind.EXTRACT, since, until + LISTED_LATE_S)
        known.noted = dict.fromkeys(noted)
    return known
