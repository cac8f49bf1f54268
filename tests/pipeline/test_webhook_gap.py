"""The measured webhook gap tells a lost webhook from a late one.

The reconciler recovers a settled job whose webhook has not come within its threshold; if the
webhook then arrives, the receiver marks the job once (metric ``WebhookLate``), whatever the
duplicates, so "recovered" less "late" is the webhooks that never came.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from scrape_pipeline_local.stack import LocalStack
from tests.pipeline.conftest import MakeStack, check_exactly_once

N = 6
# Later than the reconciler's threshold (600 s) and its next run after it (every 600 s).
LATE_BY = 1500.0


def count_answers(stack: LocalStack) -> Counter[str]:
    """The receiver's answers by outcome, counted as they are given."""
    receiver = stack.handlers["receiver"].get_receiver()
    handle = receiver.handle
    outcomes: Counter[str] = Counter()

    def counted(body: bytes, headers: Any) -> Any:
        answer = handle(body, headers)
        outcomes[answer.outcome] += 1
        return answer

    receiver.handle = counted
    return outcomes


def test_webhook_gap_late_webhooks_counted_once_lost_ones_not(make_stack: MakeStack):
    # GIVEN every webhook delayed past the reconciler's recovery, and sent twice
    stack = make_stack()
    stack.sim.faults.update(delay_min_s=LATE_BY, delay_max_s=LATE_BY, duplicate_rate=1.0)
    outcomes = count_answers(stack)
    client = stack.client()
    for i in range(N):
        client.submit_extract(f"https://example.com/late{i}")

    # WHEN the reconciler recovers them, and then their webhooks come
    stack.run_until(lambda: sum(outcomes.values()) >= 2 * N, step=10.0, limit=2 * LATE_BY)

    # THEN each was stored once, recovered by the job list, and marked late exactly once
    assert check_exactly_once(stack) == {"stored": N}
    assert stack.schedule is not None
    recovered = sum(run["recovered"]["job_list"] for run in stack.schedule.runs)
    assert recovered == N
    assert outcomes == Counter({"late": N, "duplicate": N})


def test_webhook_gap_on_time_webhooks_are_not_late(make_stack: MakeStack):
    # GIVEN webhooks that arrive, twice each
    stack = make_stack()
    stack.sim.faults.update(duplicate_rate=1.0)
    outcomes = count_answers(stack)
    client = stack.client()
    for i in range(N):
        client.submit_extract(f"https://example.com/on-time{i}")
    stack.run_until(lambda: sum(outcomes.values()) >= 2 * N, step=5.0, limit=600)
    # THEN no job is late: the first delivery recorded it, the second is a duplicate
    assert outcomes == Counter({"accepted": N, "duplicate": N})
    assert check_exactly_once(stack) == {"stored": N}
