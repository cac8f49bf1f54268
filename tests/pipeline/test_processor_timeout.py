"""A processor invocation past its timeout, in the whole pipeline: stopped, then redelivered.

The real processor runs behind a gate that holds its first invocation past the (tiny,
wall-time) timeout; the stack must stop it before it does any work, keep its messages, and
store every result once when SQS delivers them again after the visibility timeout.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from scrape_pipeline_local.stack import StackSettings
from tests.pipeline.conftest import (
    MakeStack,
    all_settled_and_done,
    check_exactly_once,
    outcome_keys,
    versions,
)

# Small enough to wait for, large enough that a real invocation on a loaded 2-core machine
# (CI, other suites running) never reaches it: only the held one does.
TINY_TIMEOUT = 1.5
POLL = 0.005
JOBS = 3
VISIBILITY_TIMEOUT = 360  # JobQueue's, from template.yaml
STEP = 1.0


class FirstCallHeld:
    """Wraps a handler: the first call waits until released, then would do the real work."""

    def __init__(self, handler: Any) -> None:
        self._handler = handler
        self.release = threading.Event()
        self.calls = 0
        self.completed = 0
        self.held_jobs: list[str] = []  # the job ids of the first call's batch

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.held_jobs = [json.loads(r["body"])["job_id"] for r in event["Records"]]
            while not self.release.wait(POLL):
                pass
        result = self._handler(event, context)
        self.completed += 1
        return result


def test_a_processor_past_its_timeout_does_nothing_and_its_batch_is_redelivered(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    from functions.processor import app

    gate = FirstCallHeld(app.lambda_handler)
    monkeypatch.setattr(app, "lambda_handler", gate)
    stack = make_stack(StackSettings(processor_timeout=TINY_TIMEOUT))
    assert stack.poller is not None
    client = stack.client()
    for i in range(JOBS):
        client.submit_extract(f"https://example.com/t{i}")

    stack.run_until(lambda: gate.calls >= 1, step=STEP, limit=120)
    timed_out_at = stack.clock.time()
    gate.release.set()

    assert stack.poller.timeouts == 1 and gate.held_jobs
    stored = versions(stack)
    assert not [job for job in gate.held_jobs if outcome_keys(job)[0] in stored]

    stack.run_until(all_settled_and_done(stack, JOBS), step=5.0, limit=1200)

    assert check_exactly_once(stack) == {"stored": JOBS}
    # The held batch's jobs were stored only once SQS delivered them again, after the
    # visibility timeout that started when the poller received them (within a window and a
    # step before the timeout).
    window = stack.poller.batching_window_seconds
    assert stack.clock.time() - timed_out_at >= VISIBILITY_TIMEOUT - window - STEP
    assert stack.poller.timeouts == 1
