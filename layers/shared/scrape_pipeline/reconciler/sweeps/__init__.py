"""The reconciler's sweeps: one shape for all of them (``Sweep``, counting into a ``SweepResult``),
their time and page ``Budget``, the paged loop, and the passes over a list read newest first."""

from __future__ import annotations

import itertools
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NotRequired, TypedDict, Unpack

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.ledger.bookkeeping import Bookkeeping
from scrape_pipeline.processor.deadline import RemainingSeconds
from scrape_pipeline.reconciler.report import SweepResult as SweepResult  # the sweeps' too

if TYPE_CHECKING:
    from scrape_pipeline.clock import Clock
    from scrape_pipeline.events.outbox import Emitter
    from scrape_pipeline.geonode.client import GeonodeClient
    from scrape_pipeline.geonode.models import JobSummary, Page
    from scrape_pipeline.geonode.webhooks import Delivery
    from scrape_pipeline.ledger.full import Ledger
    from scrape_pipeline.processor.results import ResultStore
    from scrape_pipeline.reconciler.recovery import Recoverer

# What a sweep may fail with and the run survive: the API's errors and AWS being unavailable.
SWEEP_ERRORS = (GeonodeError, AWSUnavailableError)
# The bookkeeping field holding a sweep's passes cut short: one JSON list, oldest first.
PENDING = "pending"


# Pages one sweep may read in a run (RECONCILE_MAX_PAGES' default): time is the working bound;
# this only ends a run with no deadline (the CLI, tests). 1,000 pages are 100,000 jobs.
DEFAULT_MAX_PAGES = 1000


def unlimited() -> float:
    """The remaining time of a run with no deadline (the CLI, tests): page caps bound it."""
    return math.inf


class Budget:
    """A share of a run's time, spent once ``seconds`` have gone by or ``pages`` pages are read."""

    def __init__(
        self, remaining: RemainingSeconds, seconds: float, *, pages: float = math.inf
    ) -> None:
        self._remaining = remaining
        self._pages = pages
        left = remaining()
        # With no deadline the floor is -inf: the budget is never spent.
        self._floor = -math.inf if math.isinf(left) else left - max(seconds, 0.0)

    def spent(self, pages_read: int = 0) -> bool:
        """The time is used up or ``pages_read`` reached the page cap: stop at this page."""
        return pages_read >= self._pages or self._remaining() <= self._floor

    def capped(self, pages: int) -> Budget:
        """This budget's time, at most ``pages`` pages (or its own cap, if lower)."""
        return Budget(self._remaining, self.left(), pages=min(pages, self._pages))

    def share(self, weights: Sequence[float]) -> Budget:
        """A budget for the first of ``weights``' steps out of what is left (the last gets it all):
        time a step did not use flows to the ones after it."""
        total = sum(weights)
        left = self.left()
        # Without a deadline (left inf) the seconds do not matter: the floor stays -inf.
        seconds = left if total <= 0 else left * weights[0] / total
        # The page cap is the caller's count, shared: the steps read against one cap.
        return Budget(self._remaining, seconds, pages=self._pages)

    @classmethod
    def no_deadline(cls) -> Budget:
        """A budget that is never spent: only page caps bound the work."""
        return cls(unlimited, 0.0)

    def left(self) -> float:
        """Seconds of this budget still unspent (``inf`` without a deadline)."""
        return max(0.0, self._remaining() - self._floor)


class SweepParts(TypedDict):
    """The pipeline's parts every sweep is built with (keyword arguments)."""

    ledger: Ledger
    client: GeonodeClient
    recoverer: Recoverer
    clock: Clock
    emitter: NotRequired[Emitter | None]  # None: the stack has no bus
    results: NotRequired[ResultStore | None]  # the results bucket (runs' manifests)


class Sweep[SettingsT](ABC):
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

    def run(self, budget: Budget) -> SweepResult:
        """Work while ``budget`` lasts; an API or AWS failure ends the run, named in the result."""
        result = SweepResult()
        try:
            self.work(budget, result)
        except SWEEP_ERRORS as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            result.complete = False
        return result

    @abstractmethod
    def work(self, budget: Budget, result: SweepResult) -> None:
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


@dataclass
class SavedPass:
    """A pass cut short: its range and the next page to read (``lag_from``: the job list's)."""

    start: float
    end: float
    page: int = 1
    lag_from: float | None = None

    def encode(self) -> list[float | int | None]:
        """``[start, end, page]``, or ``[start, end, page, null, lag_from]`` for a re-read range."""
        out: list[float | int | None] = [round(self.start, 3), round(self.end, 3), self.page]
        return out if self.lag_from is None else [*out, None, round(self.lag_from, 3)]

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> SavedPass:
        start, end, page, _, lag_from = (*raw, None, None)[:5]
        return cls(
            float(start), float(end), int(page), None if lag_from is None else float(lag_from)
        )


def saved_passes(saved: Mapping[str, str]) -> list[SavedPass]:
    """The passes ``saved`` holds, oldest first."""
    return [SavedPass.decode(raw) for raw in json.loads(saved.get(PENDING, "[]"))]


def pending_field(passes: Iterable[SavedPass]) -> dict[str, str]:
    """The ``pending`` field for ``passes``; none when there are none."""
    listed = [p.encode() for p in passes]
    return {PENDING: json.dumps(listed, separators=(",", ":"))} if listed else {}


def ends(page: Page[Any]) -> bool:
    """A listing read newest first ends at ``page``: the API says it is the last, or it is empty."""
    return page.is_last or not page.items


def created(entry: JobSummary | Delivery, missing: float) -> float:
    """When ``entry`` was created; one listed without its time counts as created at ``missing``."""
    return entry.created_at.timestamp() if entry.created_at else missing
