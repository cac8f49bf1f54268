"""The idle stretches a chaos run skips: the watch sweep's next poll, and the whole slots."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.reconciler.sweeps.watch import Watcher, WatchSettings
from scrape_pipeline_local.idle import jump, next_watch_poll

SETTINGS = WatchSettings(poll_seconds=3600.0, first_poll_seconds=120.0)


class _Parked:
    """The ledger's WATCHING rows, one per page (the pages are followed to the last)."""

    def __init__(self, rows: list[LedgerRow]) -> None:
        self.rows = rows

    def pending(self, state: JobState, *, since_before: float, cursor: Any = None) -> Any:
        assert state is JobState.WATCHING
        at = cursor or 0
        return self.rows[at : at + 1], (at + 1 if at + 1 < len(self.rows) else None)


def _row(
    job: str,
    parked_at: float,
    created_at: float,
    failing_since: float | None = None,
    kind: JobKind = JobKind.BATCH,
) -> Any:
    return LedgerRow(
        JobKey(kind, job),
        JobState.WATCHING,
        state_since=parked_at,
        created_at=created_at,
        source="webhook",
        job_created_at=created_at,
        failing_since=failing_since,
    )


@pytest.mark.parametrize(
    ("parked_at", "created_at", "failing_since"),
    [
        (1000.0, 990.0, None),  # young: the first poll's wait
        (10_000.0, 4_000.0, None),  # parked for half its age
        (200_000.0, 10.0, None),  # old: hourly
        (200_000.0, 10.0, 199_000.0),  # sick: its age counts from its failing run
    ],
)
# A healthy extract row under ``by_listing`` is the listing's: the next test.
@pytest.mark.parametrize(
    ("kind", "by_listing"),
    [(JobKind.BATCH, False), (JobKind.BATCH, True), (JobKind.EXTRACT, False)],
)
def test_next_watch_poll_is_when_the_watch_sweep_finds_the_row_due(
    parked_at: float,
    created_at: float,
    failing_since: float | None,
    kind: JobKind,
    by_listing: bool,
) -> None:
    row = _row("a", parked_at, created_at, failing_since, kind)
    at = next_watch_poll(_Parked([row]), SETTINGS, parked_at, by_listing=by_listing)
    sweep = SimpleNamespace(settings=SETTINGS)
    assert not Watcher._due(sweep, row, at - 1.0)  # type: ignore[arg-type]
    assert Watcher._due(sweep, row, at)  # type: ignore[arg-type]


def test_next_watch_poll_is_the_soonest_of_every_page() -> None:
    rows = [_row("old", 200_000.0, 10.0), _row("young", 200_500.0, 200_400.0)]
    assert next_watch_poll(_Parked(rows), SETTINGS, 200_500.0) == 200_500.0 + 120.0
    assert next_watch_poll(_Parked([]), SETTINGS, 0.0) == float("inf")


def test_next_watch_poll_leaves_a_healthy_extract_row_to_the_listing() -> None:
    # GIVEN a healthy extract row long overdue by age, and a batch row due in an hour
    rows = [_row("x", 1_000.0, 900.0, kind=JobKind.EXTRACT), _row("b", 200_000.0, 10.0)]
    # THEN with no listing under way only the batch's poll wakes the run; else both do
    assert next_watch_poll(_Parked(rows), SETTINGS, 200_000.0, by_listing=True) == 203_600.0
    assert next_watch_poll(_Parked(rows), SETTINGS, 200_000.0) == 1_000.0 + 120.0
    # AND a sick extract row is polled by age whatever the listing says
    sick = _row("s", 200_000.0, 10.0, failing_since=199_000.0, kind=JobKind.EXTRACT)
    assert next_watch_poll(_Parked([sick]), SETTINGS, 200_000.0, by_listing=True) == 201_000.0


def test_jump_lands_on_the_first_slot_at_or_after_the_due_time() -> None:
    # the next run is at the clock's time: runs at 0, 300, 600 and 900 see nothing due
    assert jump(0.0, 1000.0, 300.0) == 1200.0
    assert jump(0.0, 900.0, 300.0) == 900.0
    assert jump(0.0, 500.0, 300.0) == 600.0
    assert jump(0.0, 300.0, 300.0) == 0.0  # the next slot's run is the due one anyway
    assert jump(0.0, 0.0, 300.0) == 0.0
