"""The receiver under load behind the local API front: exact counts, never a 5xx.

Signed deliveries from concurrent senders over HTTP to the API Gateway front, which calls the
real handler against a moto server (``bench/load.py`` is the one harness; ``python -m
bench.load`` runs it at full size next to moto's own ceiling). A share of the deliveries
repeat an earlier job, some while the original is still in flight. Every sender must hear
200; each job must be accepted once, recorded once and enqueued once.
"""

from __future__ import annotations

import pytest

from bench.load import LoadResult, LoadStack, ceiling_phase, make_plan, run_load


def assert_exact(result: LoadResult, deliveries: int, duplicate_share: float) -> None:
    receiver = result.receiver
    duplicates = round(deliveries * duplicate_share)
    distinct = deliveries - duplicates
    # THEN every delivery got an answer, and every answer is 200: no 5xx, no reset
    assert receiver.sent == deliveries
    assert receiver.server_errors == 0
    assert receiver.statuses == {"200": deliveries}
    # AND each distinct job was accepted once; every repeat was answered as a duplicate
    assert receiver.answers == {"accepted": distinct, "duplicate": duplicates}
    # AND the ledger holds one row per job; the queue carried each job exactly once
    assert receiver.ledger_rows == distinct
    assert receiver.enqueued == distinct
    assert receiver.enqueued_more_than_once == 0
    assert receiver.queue_left == 0
    # AND some duplicates really raced their original (both requests in flight at once)
    assert receiver.in_flight_with_original > 0
    # AND the front invoked the handler once per delivery
    assert result.front_invocations == deliveries
    assert result.problems == []
    assert receiver.throughput > 0


def test_plan_has_the_asked_shape():
    # GIVEN 1,000 deliveries, 30 % duplicates, 20 senders
    plan = make_plan(1000, 0.3, 20, seed=3)
    firsts = [d for d in plan.deliveries if d.original is None]
    repeats = [d for d in plan.deliveries if d.original is not None]
    # THEN 700 distinct jobs come first each time, and 300 repeats follow an earlier delivery
    assert (plan.distinct, plan.duplicates) == (700, 300)
    assert len(firsts) == len({d.pk for d in firsts}) == 700
    assert len(repeats) == 300
    assert all(d.original is not None and d.original < d.index for d in repeats)
    assert all(plan.deliveries[d.original].pk == d.pk for d in repeats if d.original is not None)
    # AND a third of the repeats sit right behind their original; delivery ids are all new
    assert plan.racing == 100
    assert all(d.index - d.original == 1 for d in repeats if d.racing and d.original is not None)
    assert len({d.delivery_id for d in plan.deliveries}) == 1000
    # AND the three event kinds all occur
    assert {d.kind for d in plan.deliveries} == {"extract", "batch", "crawl"}


@pytest.mark.timeout(180)
def test_receiver_1000_deliveries_20_senders_exact_counts():
    # GIVEN the receiver behind the API front, and 1,000 signed deliveries, 30 % duplicates
    # WHEN 20 senders deliver them concurrently over HTTP
    result = run_load(1000, 20, 0.3, ceiling=False, limit_seconds=120.0)
    assert_exact(result, 1000, 0.3)


@pytest.mark.timeout(120)
def test_moto_ceiling_counts_exactly():
    # GIVEN moto alone, and the receiver's calls issued with boto3 by 20 threads
    with LoadStack() as stack:
        ceiling = ceiling_phase(stack, make_plan(200, 0.3, 20), 20, limit_seconds=60.0)
    # THEN its counts are exact too, so the ratio compares like with like
    assert ceiling.answers == {"accepted": 140, "duplicate": 60}
    assert (ceiling.ledger_rows, ceiling.enqueued, ceiling.queue_left) == (140, 140, 0)
    assert ceiling.problems == []
    assert ceiling.throughput > 0


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_receiver_5000_deliveries_20_senders_exact_counts_and_ceiling():
    # GIVEN 5,000 signed deliveries, 30 % duplicates, 20 senders; then moto alone, same calls
    result = run_load(5000, 20, 0.3, limit_seconds=600.0)
    assert_exact(result, 5000, 0.3)
    assert result.ceiling is not None and result.ceiling.problems == []
    assert result.ratio is not None and result.ratio > 0
