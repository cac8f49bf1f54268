"""The demo's events figures: each job with a told outcome against the events received."""

from __future__ import annotations

from scrape_pipeline_local.bus_record import Arrival, WireTimes, figures
from scrape_pipeline_local.judge import Outcome, Unit


def _arrival(event_id: str, job_id: str, at: float, kind: str = "extract") -> Arrival:
    return Arrival(event_id, "Job Stored", kind, job_id, arrived_at=at, stored_at=100.0)


def test_a_job_with_a_told_outcome_and_no_event_is_counted_and_named():
    # GIVEN a stored extract, a stored batch (two items), a dead letter and a resubmission
    outcomes = {
        Unit("extract", "e1", None): Outcome.STORED,
        Unit("batch", "b1", 0): Outcome.STORED,
        Unit("batch", "b1", 1): Outcome.DEAD_LETTERED,
        Unit("extract", "e2", None): Outcome.DEAD_LETTERED,
        Unit("extract", "e3", None): Outcome.RESUBMITTED,
    }
    # WHEN the bus brought the extract's event twice and the batch's once
    arrivals = [
        _arrival("a", "e1", 100.5),
        _arrival("a", "e1", 190.0),
        _arrival("b", "b1", 101.0, "batch"),
    ]
    found = figures(outcomes, arrivals, WireTimes())
    # THEN the dead letter lacks its event (a resubmission owes none), the repeat is counted,
    # and each stored job's latency runs to its event's first arrival
    assert (found.without_event, found.without_examples) == (1, ["extract e2"])
    assert found.repeats == 1
    assert found.received == {"Job Stored": 3}
    assert sorted(found.latencies) == [0.5, 1.0]
    assert found.latency_p99 == 1.0
