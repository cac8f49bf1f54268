"""The run sweep: a complete run gets its manifest, once, and its ``Run Completed`` event.
Open runs are checked from their head's ``checked`` index to the first unsettled entry."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final, Unpack

from scrape_pipeline.events.detail import OutcomeEvent
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger import chains
from scrape_pipeline.ledger.chains import Chain
from scrape_pipeline.processor.manifest import manifest_key
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps import Budget, Sweep, SweepParts, SweepResult, paged
from scrape_pipeline.runs import completion, owing
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.heads import Head, RunHeads
from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.plan import Run

if TYPE_CHECKING:
    from scrape_pipeline.events.outbox import Emitter
    from scrape_pipeline.processor.results import ResultStore

SWEEP_RUNS: Final = "runs"
RUN_PAGE: Final = 100  # heads a page of the index; entries (and rows) a read


class RunsSweep(Sweep[ReconcilerSettings]):
    """Complete the runs whose every URL is settled; nothing without a bus and a bucket."""

    name = SWEEP_RUNS
    recovers = False
    # The emitter and the results bucket, once ``work`` knows there are both.
    _bus: Emitter
    _store: ResultStore

    def __init__(self, settings: ReconcilerSettings, **parts: Unpack[SweepParts]) -> None:
        super().__init__(settings, **parts)
        self._heads = RunHeads(self._ledger.table_name, client=self._ledger.client)
        self._journal = DynamoJournal(self._ledger.table_name, client=self._ledger.client)

    def work(self, budget: Budget, result: SweepResult) -> None:
        """The open runs page by page, each checked while the budget lasts."""
        if self._emitter is None or self._results is None:
            return
        self._bus, self._store = self._emitter, self._results
        read = partial(self._heads.owing, limit=RUN_PAGE)
        for names in paged(budget.capped(self.settings.job_list.max_pages), read, result):
            for name in names:
                if budget.spent():
                    result.complete = False
                    return
                self._one(name, result)

    def _one(self, name: str, result: SweepResult) -> None:
        head = self._heads.get(name)
        if head is None or not head.planned:
            return  # its planner is still at work (or stopped half-way: its rerun finishes)
        result.runs_checked += 1
        event = head.completed or self._completed(head, result)
        if event is not None:
            self._tell(name, event, result)

    def _tell(self, name: str, event: str, result: SweepResult) -> None:
        """Put the run's event on the bus; the head remembers once the bus took it."""
        put = self._bus.put([OutcomeEvent.from_json(event)])
        result.failed(next(iter(put.errors), None))
        if put.sent:
            result.events_sent += 1
            self._heads.told(name, event)

    def _completed(self, head: Head, result: SweepResult) -> str | None:
        """The run's event once it is complete (manifest written first); None while open."""
        run = head.run
        if self._checked(run, head.checked) < run.entries:
            return None
        entries = self._journal.entries(run.name)
        followed = self._chains(run, entries)
        manifest = completion.build(run, entries, followed, self._batch_items, self._clock.time())
        self._store.put_json_once(manifest.key, manifest.body)
        event = completion.completed_event(run, manifest, self._store.bucket)
        result.runs_completed += 1
        return self._heads.complete(run.name, event.to_json(), self._clock.time())

    def _checked(self, run: Run, start: int) -> int:
        """How far the run is settled for good from ``start``, saved if it moved."""
        index = start
        while index < run.entries:
            stop = min(run.entries, index + RUN_PAGE)
            index = self._reached(run, index, stop)
            if index < stop:  # an entry open, or its job not settled: checked up to it
                break
        if index > start:
            self._heads.checked(run.name, index)
        return index

    def _reached(self, run: Run, index: int, stop: int) -> int:
        """The first entry from ``index`` not settled for good (``stop``: none before it)."""
        entries = self._journal.entries_between(run.name, index, stop)
        followed = self._chains(run, entries)
        reached = completion.first_unsettled(run, index, entries, followed)
        # Only the batches it would pass have their manifests read: an open run is swept
        # every minute, and the entries past its first open one are read again next time.
        passed = {completion.submitted_key(run, e) for e in entries if e.index < reached}
        ending = {key: chain for key, chain in followed.items() if key in passed}
        owed = owing.retries_owing(ending, self._batch_items, self._ledger)
        return completion.first_unsettled(run, index, entries, followed, owed)

    def _chains(self, run: Run, entries: list[Entry]) -> dict[JobKey, Chain]:
        """Each submitted entry's job followed to the job that ended its chain, if it has."""
        keys = [k for e in entries if (k := completion.submitted_key(run, e)) is not None]
        return chains.follow(self._ledger, {key: key for key in keys})

    def _batch_items(self, job_id: str) -> dict[str, Any] | None:
        """A stored batch's own manifest (its items' URLs and keys): one GetObject."""
        found = self._store.read_json(manifest_key(JobKind.BATCH, job_id), missing_ok=True)
        return found if isinstance(found, dict) else None
