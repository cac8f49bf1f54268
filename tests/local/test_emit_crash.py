"""A crash between the outcome and its emit, on the local stack: the processor is killed after
its batch's DONE writes and before their PutEvents (``emit_crash_rate``), and each event still
arrives, once by ``event_id``, from the reconciler's outbox sweep.

Judged as a subscriber sees the bus (a rule and queue of the demo's own) against the judge's
outcomes (the simulator's record and the bucket), never the ledger's word.
"""

from __future__ import annotations

from collections import Counter

from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline_local.demo import STEP_SECONDS, Demo


def test_events_whose_emit_died_arrive_once_each_from_the_outbox_sweep():
    # GIVEN the demo's workload whose processor dies before a third of its PutEvents calls,
    # its batches' outcomes already DONE, amid 20 % dropped webhooks
    demo = Demo(jobs=60, chaos="crash-emit", seed=4)
    # WHEN it runs until every outcome is stored and every event came
    report = demo.run()
    events = report.events
    # THEN the kills happened, and the sweep sent what they lost
    assert report.crashes["emit"] > 0
    assert events.swept > 0
    # AND nothing was lost or doubled in S3, and every told outcome has its event on the bus
    assert (report.lost, report.processed_twice) == (0, 0)
    assert events.without_event == 0, events.without_examples
    # AND each event came once by its id: the sweep repeats none the processor had sent
    assert demo.bus is not None
    came = Counter(a.event_id for a in demo.bus.arrivals)
    assert events.repeats == 0 and set(came.values()) == {1}
    assert demo.wire.swept <= set(came)
    # AND each lost emit arrived within one reconciler interval after the outbox's grace
    # (an event younger than the grace may still be its live batch's to send), give or take
    # the demo's step (its schedule runs at the first step past a run's time)
    assert demo.stack.schedule is not None  # the template's rate(1 minute)
    grace = ReconcilerSettings().outbox_grace_seconds
    bound = grace + demo.stack.schedule.interval + STEP_SECONDS
    late = [
        (a.event_id, a.arrived_at - a.stored_at)
        for a in demo.bus.arrivals
        if a.event_id in demo.wire.swept and a.stored_at is not None
    ]
    assert late and all(waited <= bound for _, waited in late), late
    print(f"emits killed {report.crashes['emit']}, swept {events.swept}, bound {bound:.0f} s")
    print(f"latest swept event {events.swept_latency_max:.0f} s after its outcome")
