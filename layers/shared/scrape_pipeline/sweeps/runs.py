"""The run sweep: a run complete gets its manifest, once, and its ``Run Completed`` event.

Every run, this reads the runs still owing their event from the sparse outbox index (their
heads sit there from planning until the bus took it: ``scrape_pipeline.runs.heads``). For
each, it goes on from the head's ``checked`` index, 100 entries and their 100 job rows a read,
each resubmitted job followed to the job that carries on for it (``scrape_pipeline.chains``,
one read more a link), and stops at the first entry whose chain has not ended (the rule
``runs show`` exits 0 on) or whose final job's event is still in the outbox (the outbox sweep,
run first, sends it; for a stored batch, its retried items' too: one GetObject of its
manifest, ``scrape_pipeline.runs.owing``), saving how far it got. A run checked to its end is
complete:

    manifest    ``runs/<run>/manifest.json`` put with If-None-Match (a repeat keeps the first)
    event       written on the head once (conditional), so every repeat carries its event_id
    emit        PutEvents; once taken, the head leaves the index (a crash before: sent again)

Cost: an open run, two GetItems of its head (the run, and how far it is checked) and one
BatchGetItem each of its next entries and their rows a run (stopping at the first open one);
each entry and row is read about twice over the run's life (once settled, once for the
manifest), and a batch's own manifest once: 2 million reads of 1 KB each, 3.5 million read
units (the first entry read only is eventually consistent) per million extract jobs, $0.44 on
demand, and one PutObject and one PutEvents per run. The manifest is built in one go (its
entries and rows read again, held in memory): runs of tens of thousands of URLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, Unpack

from scrape_pipeline import chains
from scrape_pipeline.budget import Budget
from scrape_pipeline.chains import Chain
from scrape_pipeline.events.detail import OutcomeEvent
from scrape_pipeline.events.outbox import Emitter
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.manifest import manifest_key
from scrape_pipeline.results import ResultStore
from scrape_pipeline.runs import completion, owing
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.heads import Head, RunHeads
from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.plan import Run
from scrape_pipeline.sweeps import Sweep, SweepParts, SweepResult

if TYPE_CHECKING:
    from scrape_pipeline.reconciler import ReconcileReport

SWEEP_RUNS: Final = "runs"
RUN_PAGE: Final = 100  # heads a page of the index; entries (and rows) a read


class RunsSettings(Protocol):
    """What the sweep reads of ``ReconcilerSettings`` (documented there)."""

    @property
    def max_pages(self) -> int: ...


@dataclass
class RunsResult(SweepResult):
    """What one run sweep did: runs checked, runs completed, their events sent."""

    runs_checked: int = 0
    runs_completed: int = 0
    run_events_sent: int = 0

    def add_to(self, report: ReconcileReport) -> None:
        report.runs_checked += self.runs_checked
        report.runs_completed += self.runs_completed
        report.events_sent += self.run_events_sent


class RunsSweep(Sweep[RunsSettings, RunsResult]):
    """Complete the runs whose every URL is settled; nothing without a bus and a bucket."""

    name = SWEEP_RUNS
    recovers = False

    def __init__(self, settings: RunsSettings, **parts: Unpack[SweepParts]) -> None:
        super().__init__(settings, **parts)
        self._emitter: Emitter | None = parts.get("emitter")
        self._results: ResultStore | None = parts.get("results")
        self._heads = RunHeads(self._ledger.table_name, client=self._ledger.client)
        self._journal = DynamoJournal(self._ledger.table_name, client=self._ledger.client)

    def new_result(self) -> RunsResult:
        return RunsResult()

    def work(self, budget: Budget, result: RunsResult) -> None:
        """The open runs page by page, each checked while the budget lasts."""
        if self._emitter is None or self._results is None:
            return
        pages = budget.capped(self.settings.max_pages)
        cursor: dict[str, Any] | None = None
        read = 0
        while not pages.spent(read):
            names, cursor = self._heads.owing(limit=RUN_PAGE, cursor=cursor)
            read += 1
            for name in names:
                if budget.spent():
                    result.complete = False
                    return
                self._one(name, result)
            if cursor is None:
                return
        result.complete = False

    def _one(self, name: str, result: RunsResult) -> None:
        head = self._heads.get(name)
        run = self._journal.run(name)
        if head is None or run is None or not head.planned:
            return  # its planner is still at work (or stopped half-way: its rerun finishes)
        result.runs_checked += 1
        event = head.completed or self._completed(run, head, result)
        if event is None:
            return
        assert self._emitter is not None
        put = self._emitter.bus.put([OutcomeEvent.from_json(event)])
        if put.error and result.error is None:
            result.error = put.error
        if put.sent:
            result.run_events_sent += 1
            self._heads.told(name, event)

    def _completed(self, run: Run, head: Head, result: RunsResult) -> str | None:
        """The run's event once it is complete (manifest written first); None while open."""
        if self._checked(run, head.checked) < run.entries:
            return None
        entries = self._journal.entries(run.name)
        followed = self._chains(run, entries)
        assert self._results is not None
        manifest = completion.build(run, entries, followed, self._batch_items, self._clock.time())
        self._results.put_json_once(manifest.key, manifest.body)
        event = completion.completed_event(run, manifest, self._results.bucket)
        result.runs_completed += 1
        return self._heads.complete(run.name, event.to_json(), self._clock.time())

    def _checked(self, run: Run, start: int) -> int:
        """How far the run is settled for good from ``start``, saved if it moved."""
        index = start
        while index < run.entries:
            stop = min(run.entries, index + RUN_PAGE)
            entries = self._journal.entries_between(run.name, index, stop)
            followed = self._chains(run, entries)
            reached = completion.first_unsettled(run, index, entries, followed)
            # Only the batches it would pass have their manifests read: an open run is swept
            # every minute, and the entries past its first open one are read again next time.
            passed = {completion.submitted_key(run, e) for e in entries if e.index < reached}
            ending = {key: chain for key, chain in followed.items() if key in passed}
            owed = owing.retries_owing(ending, self._batch_items, self._ledger)
            reached = completion.first_unsettled(run, index, entries, followed, owed)
            if reached < stop:  # an entry open, or its job not settled: checked up to it
                index = reached
                break
            index = stop
        if index > start:
            self._heads.checked(run.name, index)
        return index

    def _chains(self, run: Run, entries: list[Entry]) -> dict[JobKey, Chain]:
        """Each submitted entry's job followed to the job that ended its chain, if it has."""
        keys = [k for e in entries if (k := completion.submitted_key(run, e)) is not None]
        return chains.follow(self._ledger, {key: key for key in keys})

    def _batch_items(self, job_id: str) -> dict[str, Any] | None:
        """A stored batch's own manifest (its items' URLs and keys): one GetObject."""
        assert self._results is not None
        found = self._results.read_json(manifest_key(JobKind.BATCH, job_id), missing_ok=True)
        return found if isinstance(found, dict) else None
