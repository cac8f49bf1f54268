"""Local ``lambda_runtime``: a context with a real deadline and an invoker that stops overruns.

Timeouts here are wall time by nature: they are tiny (<= 0.3 s) and the handlers wait on
events, so nothing sleeps longer than the timeout under test.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scrape_pipeline_local.lambda_runtime import LambdaContext, LambdaTimeout, TimedInvoker

TINY_TIMEOUT = 0.2
POLL = 0.005


class FakeMonotonic:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_remaining_time_counts_down_from_the_timeout_and_stops_at_zero():
    clock = FakeMonotonic()
    context = LambdaContext("processor", 60, monotonic=clock)

    assert context.get_remaining_time_in_millis() == 60_000
    clock.now += 12.5
    assert context.get_remaining_time_in_millis() == 47_500
    clock.now += 100
    assert context.get_remaining_time_in_millis() == 0


def test_each_context_has_its_own_request_id_and_the_functions_arn():
    first, second = LambdaContext("receiver", 10), LambdaContext("receiver", 10)

    assert first.aws_request_id != second.aws_request_id
    assert first.invoked_function_arn.endswith(":function:receiver")


def test_the_handler_sees_its_remaining_time_decrease_below_the_timeout():
    clock = FakeMonotonic()
    seen: list[int] = []

    def handler(event: dict[str, Any], context: Any) -> str:
        seen.append(context.get_remaining_time_in_millis())
        clock.now += 2
        seen.append(context.get_remaining_time_in_millis())
        return "done"

    outcome = TimedInvoker(handler, "processor", 60, monotonic=clock).invoke({})

    assert outcome.ok and outcome.result == "done"
    assert seen == [60_000, 58_000]


def test_a_fresh_request_id_per_invocation_unless_the_caller_gives_one():
    ids: list[str] = []
    invoker = TimedInvoker(lambda event, context: ids.append(context.aws_request_id), "f", 1)

    invoker.invoke({})
    invoker.invoke({})
    invoker.invoke({}, request_id="retry-of-1")

    assert len(set(ids)) == 3 and ids[2] == "retry-of-1"


def test_an_error_is_reported_not_raised():
    def handler(event: dict[str, Any], context: Any) -> None:
        raise ValueError("boom")

    outcome = TimedInvoker(handler, "f", 1).invoke({})

    assert not outcome.ok and not outcome.timed_out
    assert isinstance(outcome.error, ValueError)


def test_a_handler_past_its_timeout_is_stopped_even_through_except_exception():
    release = threading.Event()
    effects: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        effects.append("before the deadline")
        try:
            while not release.wait(POLL):
                pass
        except Exception:  # noqa: BLE001 - what a handler might do; must not stop the timeout
            effects.append("swallowed")
        effects.append("after the deadline")

    invoker = TimedInvoker(handler, "processor", TINY_TIMEOUT)
    outcome = invoker.invoke({})
    release.set()

    assert outcome.timed_out and not outcome.ok and not outcome.abandoned
    assert invoker.timeouts == 1
    # The invoker joined the worker: nothing after the deadline ran, or ever will.
    assert effects == ["before the deadline"]
    assert not [t for t in threading.enumerate() if t.name == "lambda-processor"]


def test_a_handler_stuck_in_c_past_the_grace_is_reported_abandoned():
    release = threading.Event()
    effects: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        release.wait()  # blocked in C: the exception waits for it to return
        effects.append("after the deadline")

    invoker = TimedInvoker(handler, "stuck", TINY_TIMEOUT, grace_seconds=TINY_TIMEOUT)
    outcome = invoker.invoke({})

    assert outcome.timed_out and outcome.abandoned and invoker.abandoned == 1
    release.set()
    for thread in [t for t in threading.enumerate() if t.name == "lambda-stuck"]:
        thread.join(timeout=5)
    # The pending LambdaTimeout fires as soon as the wait returns.
    assert effects == []


def test_lambda_timeout_is_not_an_exception():
    assert not issubclass(LambdaTimeout, Exception)


def test_a_timeout_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        TimedInvoker(lambda event, context: None, "f", 0)
