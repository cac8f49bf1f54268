"""What the scale benchmark measures from outside the pipeline: lag, calls, boundedness."""

from __future__ import annotations

import heapq
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.jobs import JobKey, JobState
from scrape_pipeline.ledger import PARTITION_KEY, Ledger

# BatchGetItem's limit: the tracker reads the ledger this many keys at a time.
KEYS_PER_READ = 100
# A job counts as handed to the pipeline once its row is in any of these states (a RECEIVED
# row is the receiver's: its message went out with it).
IN_PIPELINE = frozenset(
    state.value
    for state in (JobState.RECEIVED, JobState.ENQUEUED, JobState.PROCESSING, JobState.DONE)
)


@dataclass(order=True)
class _Job:
    settle_at: float
    key: JobKey = field(compare=False)


class LagTracker:
    """The age of the oldest settled job the pipeline has not taken in yet."""

    def __init__(self, ledger: Ledger) -> None:
        self._db = ledger.client
        self._table = ledger.table_name
        self._unsettled: list[_Job] = []
        self._settled: list[_Job] = []  # in settle order: the walk's track
        self._next = 0  # the first settled job not yet seen in the pipeline

    def add(self, key: JobKey, settle_at: float) -> None:
        """A job the simulator will settle at ``settle_at``."""
        heapq.heappush(self._unsettled, _Job(settle_at, key))

    def lag(self, now: float) -> float:
        """Seconds since the oldest job settled by ``now`` and not in the pipeline settled."""
        while self._unsettled and self._unsettled[0].settle_at <= now:
            self._settled.append(heapq.heappop(self._unsettled))
        while self._next < len(self._settled):
            chunk = self._settled[self._next : self._next + KEYS_PER_READ]
            states = self._states([job.key for job in chunk])
            for job in chunk:
                if states.get(job.key.pk) not in IN_PIPELINE:
                    return now - job.settle_at
                self._next += 1
        return 0.0

    def _states(self, keys: list[JobKey]) -> dict[str, str]:
        """pk -> state of the rows that exist, reading only those two attributes."""
        request: Any = {
            self._table: {
                "Keys": [{PARTITION_KEY: {"S": key.pk}} for key in keys],
                "ProjectionExpression": "#pk, #state",
                "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#state": "state"},
            }
        }
        states: dict[str, str] = {}
        while request:
            response = self._db.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(self._table, []):
                states[item[PARTITION_KEY]["S"]] = item["state"]["S"]
            request = response.get("UnprocessedKeys") or {}
        return states

    @property
    def waiting(self) -> int:
        """Settled jobs from the oldest missing one on (an upper bound of the backlog)."""
        return len(self._settled) - self._next


# How much the lag may move over the period's second half and still count as not growing:
# runs land anywhere within a job's last interval, so a lag jitters by up to one interval.
JITTER_SHARE = 0.5  # of an interval: last quarter's peak over the second quarter's
GROWTH_SHARE = 0.25  # of an interval: the fitted line's rise across the second half
MIN_JUDGED_RUNS = 4  # fewer runs have no second half worth a trend
BOUNDED_RULE = (
    "over the runs of the period's second half, the lag's least-squares line rises by"
    f" at most {GROWTH_SHARE:g} of a schedule interval end to end, and the highest lag of the"
    f" last quarter of runs is at most {JITTER_SHARE:g} of an interval above the second"
    " quarter's highest"
)


def bounded(lags: Sequence[float], interval: float) -> bool | None:
    """True when the lag did not grow over the period's second half (``BOUNDED_RULE``);
    None with fewer than ``MIN_JUDGED_RUNS`` runs."""
    if len(lags) < MIN_JUDGED_RUNS:
        return None
    half = len(lags) // 2
    quarter = max(1, len(lags) // 4)
    second_quarter = lags[half - quarter : half]
    last_quarter = lags[-quarter:]
    if max(last_quarter) > max(second_quarter) + JITTER_SHARE * interval:
        return False
    tail = list(lags[half:])
    return _slope(tail) * (len(tail) - 1) <= GROWTH_SHARE * interval


def _slope(values: Sequence[float]) -> float:
    """Least-squares slope of ``values`` against their index."""
    if len(values) < 2:
        return 0.0
    xs = range(len(values))
    x_mean = statistics.fmean(xs)
    y_mean = statistics.fmean(values)
    num = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, values, strict=True))
    den = sum((x - x_mean) ** 2 for x in xs)
    return num / den


def per_thousand(counts: Counter[str] | dict[str, int], jobs: int) -> dict[str, float]:
    """Calls per 1,000 jobs, by key, largest first."""
    if jobs == 0:
        return {}
    ordered = sorted(counts.items(), key=lambda item: -item[1])
    return {name: round(n * 1000 / jobs, 2) for name, n in ordered if n}
