"""The operator's evidence for a batch or crawl in doubt: the ledger's rows, and several sources
at once (``runs resolve``, the CLI's ``submit``); the submitter function reads the log only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKind, JobState
from scrape_pipeline.runs.evidence import CandidateSource, first_seen
from scrape_pipeline_ops.ledger import created_since

if TYPE_CHECKING:
    from scrape_pipeline.ledger.full import Ledger

# The states a row of a job not finished is in: what the ledger's pending index holds.
_NOT_DONE: Final = tuple(state for state in JobState if state is not JobState.DONE)


class LedgerCandidates:
    """Batches and crawls the ledger has rows for: one bounded Query of the pending index per
    state not DONE; ``scan_done`` also Scans the table for rows DONE already (operator only)."""

    def __init__(self, ledger: Ledger, *, scan_done: bool = False, page: int = 100) -> None:
        self.ledger = ledger
        self.scan_done = scan_done
        self.page = page

    def candidates(self, kind: JobKind, since: float) -> Iterator[str]:
        found = self._pending(kind, since)
        if self.scan_done:
            found = chain(found, created_since(self.ledger, kind, since))
        return first_seen(found)

    def _pending(self, kind: JobKind, since: float) -> Iterator[str]:
        until = self.ledger.clock.time() + 1.0
        for state in _NOT_DONE:
            cursor: dict[str, Any] | None = None
            while True:
                rows, cursor = self.ledger.pending(
                    state, since_before=until, since_after=since, limit=self.page, cursor=cursor
                )
                yield from (r.key.job_id for r in rows if r.key.kind is kind)
                if not cursor:
                    break


class AnyOf:
    """The candidates of several sources, each id once; a source that fails gives nothing,
    unless every source failed (the first failure is raised: the entries stay in doubt)."""

    def __init__(self, *sources: CandidateSource) -> None:
        self.sources: Sequence[CandidateSource] = sources

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        named: list[str] = []
        failures: list[PipelineError] = []
        for source in self.sources:
            try:
                named += source.candidates(kind, since)
            except PipelineError as exc:
                failures.append(exc)
        if failures and len(failures) == len(self.sources):
            raise failures[0]
        return list(dict.fromkeys(named))
