"""Local ``scheduler``: scheduled runs on a manual clock, retried as Lambda retries async calls."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.scheduler import Schedule

INTERVAL = 3600.0  # long enough that only retries run inside a test's span
FIRST_RETRY = 60.0
SECOND_RETRY = 120.0
TINY_TIMEOUT = 0.2
POLL = 0.005


class Flaky:
    """Raises for its first ``failures`` calls, then returns ``{"recovered": {...}}``."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[tuple[str, str]] = []  # (event time, request id)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls.append((event["time"], context.aws_request_id))
        if len(self.calls) <= self.failures:
            raise RuntimeError(f"failure {len(self.calls)}")
        return {"recovered": {"webhook": 1}}


def schedule_for(handler: Any, clock: ManualClock, **kwargs: Any) -> Schedule:
    return Schedule(handler, INTERVAL, clock, first_run_after=0, **kwargs)


def test_a_failing_run_is_retried_twice_on_the_clock_then_given_up():
    clock = ManualClock()
    handler = Flaky(failures=10)
    schedule = schedule_for(handler, clock)

    assert schedule.tick()
    clock.advance(FIRST_RETRY - 1)
    assert not schedule.tick()
    clock.advance(1)
    assert schedule.tick()
    clock.advance(SECOND_RETRY - 1)
    assert not schedule.tick()
    clock.advance(1)
    assert schedule.tick()
    clock.advance(INTERVAL - FIRST_RETRY - SECOND_RETRY - 1)
    assert not schedule.tick()  # no third retry; the next scheduled run is not due yet

    assert [f.attempt for f in schedule.failures] == [0, 1, 2]
    assert schedule.failures[-1].retry_at is None and schedule.gave_up == 1
    assert schedule.runs == []
    # A retry is the same event under the same request id, as Lambda's async retries are.
    assert len(set(handler.calls)) == 1


def test_a_retry_that_succeeds_is_a_run():
    clock = ManualClock()
    schedule = schedule_for(Flaky(failures=1), clock)

    schedule.tick()
    clock.advance(FIRST_RETRY)
    schedule.tick()

    assert schedule.runs == [{"recovered": {"webhook": 1}}]
    assert len(schedule.failures) == 1 and schedule.gave_up == 0


def test_retries_can_be_turned_off():
    clock = ManualClock()
    schedule = schedule_for(Flaky(failures=1), clock, max_retries=0)

    schedule.tick()
    clock.advance(INTERVAL - 1)

    assert not schedule.tick()
    assert schedule.gave_up == 1


def test_more_retries_than_lambda_allows_are_refused():
    with pytest.raises(ValueError, match="max_retries"):
        schedule_for(Flaky(0), ManualClock(), max_retries=3)


def test_a_run_past_its_timeout_is_stopped_and_retried():
    clock = ManualClock()
    release = threading.Event()
    effects: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        while not release.wait(POLL):
            pass
        effects.append("past the deadline")
        return {"recovered": {}}

    schedule = schedule_for(handler, clock, timeout_seconds=TINY_TIMEOUT)
    schedule.tick()
    release.set()

    assert schedule.timeouts == 1 and effects == []
    assert schedule.failures[0].timed_out and schedule.failures[0].retry_at is not None
    clock.advance(FIRST_RETRY)
    schedule.tick()
    assert schedule.runs == [{"recovered": {}}]
