"""The reconciler's sweeps: one shape for all of them (``Sweep``, its ``SweepResult``), and
the paged loop most of them read their index with."""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NotRequired, Protocol, TypedDict, Unpack

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.ledger.bookkeeping import Bookkeeping

# Only for annotations: ``job_list_state`` (which the processor and submitter load for the
# listing lag) then loads none of the reconciler's recovery, client or result store.
if TYPE_CHECKING:
    from scrape_pipeline.clock import Clock
    from scrape_pipeline.events.outbox import Emitter
    from scrape_pipeline.geonode.client import GeonodeClient
    from scrape_pipeline.ledger.full import Ledger
    from scrape_pipeline.processor.results import ResultStore
    from scrape_pipeline.reconciler.budget import Budget
    from scrape_pipeline.reconciler.recovery import Recoverer
    from scrape_pipeline.reconciler.report import ReconcileReport

# What a sweep may fail with and the run survive: the API's errors and AWS being unavailable.
SWEEP_ERRORS = (GeonodeError, AWSUnavailableError)


@dataclass
class SweepResult:
    """What one sweep's run did: the counts every sweep has; subclasses add their own."""

    recovered: int = 0  # jobs enqueued (or woken)
    complete: bool = True  # False: cut short (time, pages) or failed; the next run goes on
    error: str | None = None  # what failed ("ErrorType: message"), after the work before it

    def add_to(self, report: ReconcileReport) -> None:
        """Add this sweep's own counts to the run's report (``ReconcileReport.add`` the rest)."""

    def failed(self, error: str | None) -> None:
        """Note ``error`` (None: none) unless an earlier one is noted: the first cause is kept."""
        if error and self.error is None:
            self.error = error


class SweepParts(TypedDict):
    """The pipeline's parts every sweep is built with (keyword arguments)."""

    ledger: Ledger
    client: GeonodeClient
    recoverer: Recoverer
    clock: Clock
    emitter: NotRequired[Emitter | None]  # None: the stack has no bus
    results: NotRequired[ResultStore | None]  # the results bucket (runs' manifests)


class ReconcilerKnobs(Protocol):
    """What the outbox, runs, stuck-rows and delivery-log sweeps read of ``ReconcilerSettings``."""

    @property
    def max_pages(self) -> int: ...
    @property
    def lookback_seconds(self) -> float: ...
    @property
    def stale_after_seconds(self) -> float: ...
    @property
    def rows_per_state(self) -> int: ...
    @property
    def delivery_overlap_seconds(self) -> float: ...
    @property
    def delivery_page_size(self) -> int: ...
    @property
    def outbox_grace_seconds(self) -> float: ...


class Sweep[SettingsT, ResultT: SweepResult](ABC):
    """A bounded, resumable search for jobs the webhooks missed."""

    name: ClassVar[str]  # its recovery source: the report's and the metric's name for it
    # It recovers jobs (counted as the webhook gap); the outbox sweep recovers events.
    recovers: ClassVar[bool] = True

    def __init__(self, settings: SettingsT, **parts: Unpack[SweepParts]) -> None:
        self.settings = settings
        self._ledger = parts["ledger"]
        self._books = Bookkeeping(self._ledger)
        self._client = parts["client"]
        self._recoverer = parts["recoverer"]
        self._clock = parts["clock"]
        self._emitter = parts.get("emitter")
        self._results = parts.get("results")

    def run(self, budget: Budget) -> ResultT:
        """Work while ``budget`` lasts; an API or AWS failure ends the run, named in the result."""
        result = self.new_result()
        try:
            self.work(budget, result)
        except SWEEP_ERRORS as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            result.complete = False
        return result

    @abstractmethod
    def new_result(self) -> ResultT:
        """An empty result of this sweep's kind."""

    @abstractmethod
    def work(self, budget: Budget, result: ResultT) -> None:
        """The sweep itself, counting into ``result`` as it goes (so a failure keeps them)."""


Cursor = dict[str, Any] | None


def paged[T](
    budget: Budget, read: Callable[..., tuple[T, Cursor]], result: SweepResult
) -> Iterator[T]:
    """Each page ``read(cursor=...)`` gives, from the first, while ``budget`` lasts (its page cap
    counted here); one cut short leaves ``result`` incomplete."""
    cursor: Cursor = None
    for count in itertools.count():
        if budget.spent(count):
            result.complete = False
            return
        page, cursor = read(cursor=cursor)
        yield page
        if cursor is None:
            return
