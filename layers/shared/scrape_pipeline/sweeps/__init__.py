"""The reconciler's sweeps: one shape for all of them.

A sweep is a class built from its settings and the pipeline's parts (``Sweep``), whose
``run(budget)`` works until done or the budget (time and pages) is spent and returns a
``SweepResult``: how many jobs it recovered, whether it finished, the failure that cut it
short (an API or AWS error: the work done before it is kept and counted), and its own counts,
which it adds to the run's report (``SweepResult.add_to``). The reconciler's table
(``scrape_pipeline.reconciler.SWEEP_TABLE``) says which sweeps run, in which order, with
which share of the run's time and at which cadence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, NotRequired, TypedDict, Unpack

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.ledger import Bookkeeping

# Names only the annotations use: a module of this package that another function needs
# (``job_list_state``: the listing lag the processor and submitter allow for) then loads none
# of the reconciler's recovery, client or result store with it.
if TYPE_CHECKING:
    from scrape_pipeline.budget import Budget
    from scrape_pipeline.clock import Clock
    from scrape_pipeline.events.outbox import Emitter
    from scrape_pipeline.geonode.client import GeonodeClient
    from scrape_pipeline.ledger import Ledger
    from scrape_pipeline.reconciler import ReconcileReport
    from scrape_pipeline.recovery import Recoverer
    from scrape_pipeline.results import ResultStore

# What a sweep may fail with and the run survive: the API's errors and AWS being unavailable.
SWEEP_ERRORS = (GeonodeError, AWSUnavailableError)


@dataclass
class SweepResult:
    """What one sweep's run did: the counts every sweep has; subclasses add their own."""

    recovered: int = 0  # jobs enqueued (or woken)
    complete: bool = True  # False: cut short (time, pages) or failed; the next run goes on
    error: str | None = None  # what failed ("ErrorType: message"), after the work before it

    def add_to(self, report: ReconcileReport) -> None:
        """Add this sweep's own counts to the run's report (the common ones are the report's)."""


class SweepParts(TypedDict):
    """The pipeline's parts every sweep is built with (keyword arguments)."""

    ledger: Ledger
    client: GeonodeClient
    recoverer: Recoverer
    clock: Clock
    emitter: NotRequired[Emitter | None]  # the outcome events' (None: the stack has no bus)
    results: NotRequired[ResultStore | None]  # the results bucket (runs' manifests go there)


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
