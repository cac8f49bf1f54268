"""The pace's decisions on a manual clock: slots, slow start, AIMD, pauses; and the control
law against the simulator's own token bucket (no HTTP, no real sleep)."""

from __future__ import annotations

import pytest

from scrape_pipeline.runs.pace import Pace, PaceSettings
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator.ratelimit import TokenBucketLimiter


def pace(clock: ManualClock, **settings: float) -> Pace:
    return Pace(clock, settings=PaceSettings(**settings))  # type: ignore[arg-type]


def test_pace_hands_out_slots_one_interval_apart():
    clock = ManualClock(100.0)
    p = pace(clock, start_rate=10.0)
    slots = [p.turn() for _ in range(4)]
    assert slots == pytest.approx([100.0, 100.1, 100.2, 100.3])
    assert clock.sleeps == pytest.approx([0.1, 0.1, 0.1])


def test_pace_slow_start_then_halves_on_a_429_and_grows_additively():
    clock = ManualClock(0.0)
    p = pace(clock, start_rate=10.0, increase=0.1)
    for _ in range(5):
        p.answered(p.turn())
    assert p.rate == pytest.approx(15.0)  # slow start: one more per clean answer
    p.throttled(p.turn(), 1.0)
    assert p.rate == pytest.approx(7.5)  # halved once
    sent = p.turn()
    p.answered(sent)
    # additive: a tenth of the 15/s it was cut from, 1.5/s, per second of answers
    assert p.rate == pytest.approx(7.5 + 1.5 / 7.5)


def test_pace_429s_of_one_congestion_cut_once_and_pause_everyone():
    clock = ManualClock(0.0)
    p = pace(clock, start_rate=20.0)
    sent = [p.turn() for _ in range(3)]  # three in flight
    p.throttled(sent[0], 2.0)
    p.throttled(sent[1], 2.0)  # sent before the cut: the same congestion
    p.throttled(sent[2], 2.0)
    assert p.rate == pytest.approx(10.0)  # halved once for the three
    now = clock.time()
    assert p.turn() == pytest.approx(now + 2.0)  # the next send waits out Retry-After
    later = p.turn()
    p.throttled(later, 1.0)  # sent after the cut: a new congestion
    assert p.rate == pytest.approx(5.0)  # halved again


def test_a_slot_past_the_latest_is_refused_at_once_and_not_taken():
    clock = ManualClock(0.0)
    p = pace(clock, start_rate=10.0)
    p.throttled(p.turn(), 30.0)  # a 429 asks for 30 s
    # a caller with 10 s left gets no slot and does not sleep
    assert p.turn_before(10.0) is None and clock.sleeps == []
    # the slot it did not take is the next caller's: right after the pause
    assert p.turn_before(60.0) == pytest.approx(30.0)
    assert p.turn() == pytest.approx(30.2)  # at the halved rate, 5/s


def test_pace_does_not_grow_on_slow_answers_or_when_workers_lag():
    clock = ManualClock(0.0)
    p = pace(clock, start_rate=10.0, slow_s=1.0)
    sent = p.turn()
    clock.advance(2.0)  # a slow answer
    p.answered(sent)
    assert p.rate == pytest.approx(10.0)
    clock.advance(5.0)  # nobody came for the slots: the rate is not what limits sending
    p.answered(p.turn())
    assert p.rate == pytest.approx(10.0)


def test_pace_waiting_worker_respects_a_pause_set_while_it_slept(monkeypatch: pytest.MonkeyPatch):
    clock = ManualClock(0.0)
    p = pace(clock, start_rate=1.0)
    p.turn()
    first = p._next  # the slot the next worker will take

    def sleep_and_get_paused(seconds: float) -> None:
        ManualClock.sleep(clock, seconds)
        if clock.time() <= first:
            p.throttled(0.0, 3.0)  # another worker's 429 lands while this one waits

    monkeypatch.setattr(clock, "sleep", sleep_and_get_paused)
    assert p.turn() >= first + 3.0 - 1e-9


@pytest.mark.parametrize(("rate", "burst"), [(50.0, 100), (10.0, 20), (200.0, 400)])
def test_pace_against_a_token_bucket_stays_near_the_limit_with_few_429s(rate: float, burst: int):
    # GIVEN the simulator's token bucket and instant answers, for 600 s of manual clock
    clock = ManualClock(0.0)
    bucket = TokenBucketLimiter(rate, burst)
    p = Pace(clock)
    accepted = throttled = 0
    while clock.time() < 600.0:
        sent = p.turn()
        wait = bucket.acquire("key", clock.time())
        if wait:
            throttled += 1
            p.throttled(sent, wait)
        else:
            accepted += 1
            p.answered(sent)
    # THEN it posted at >= 0.9 of the limit, and <= 2 % of its POSTs were answered 429
    assert accepted / clock.time() >= 0.9 * rate
    assert throttled / (accepted + throttled) <= 0.02


def test_pace_concurrency_follows_rate_and_latency_up_to_the_workers():
    clock = ManualClock(0.0)
    p = pace(clock, start_rate=10.0, max_rate=10.0, workers=8)
    assert p.concurrency() == 1  # no answer has taken time yet
    for _ in range(30):
        sent = p.turn()
        clock.advance(0.2)  # answers take 200 ms
        p.answered(sent)
    assert p.concurrency() == 4  # 10/s x 0.2 s, twice over
    fast = pace(clock, start_rate=100.0, workers=8)
    for _ in range(30):
        sent = fast.turn()
        clock.advance(0.2)
        fast.answered(sent)
    assert fast.concurrency() == 8  # 100/s x 0.2 s x 2 = 40: capped by the workers
    slow = pace(clock, start_rate=5.0, workers=8)
    sent = slow.turn()
    clock.advance(0.1)
    slow.answered(sent)
    assert slow.concurrency() == 1  # 6/s x 0.02 s x 2 < 1
