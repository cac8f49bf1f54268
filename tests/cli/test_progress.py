"""The submit progress in line mode (stderr not a terminal), on a manual clock."""

from __future__ import annotations

import io

from scrape_pipeline.runs.journal import Entry
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import Run, RunMode, RunSpec
from scrape_pipeline.runs.report import Event, EventKind, Planned
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_ops.cli.progress import Progress

S = EntryState


def planned(n: int, submitted: int = 0) -> Planned:
    spec = RunSpec.of([f"https://example.com/p/{i}" for i in range(n)], RunMode.ASYNC)
    resumed = {S.SUBMITTED: submitted} if submitted else {}
    return Planned(Run.planned("r", spec, 0.0), not submitted, resumed)


def event(kind: EventKind, index: int) -> Event:
    return Event(kind, Entry("r", index, (f"https://example.com/p/{index}",), S.SUBMITTED))


def test_progress_prints_one_line_every_few_seconds_and_a_last_one():
    clock, err = ManualClock(), io.StringIO()
    passed: list[Event] = []
    progress = Progress(err, clock, then=passed.append, every_s=5.0)
    throttled = [0]
    with progress.shown(planned(10, submitted=2), lambda: throttled[0]):
        for i in range(4):  # four posted in 2 s: no line yet
            clock.advance(0.5)
            progress(event(EventKind.SUBMITTED, 2 + i))
        assert err.getvalue() == ""
        throttled[0] = 3
        clock.advance(3.0)
        progress(event(EventKind.IN_DOUBT, 6))  # 5 s in: the first line
        progress(event(EventKind.SUBMITTED, 7))  # at once after: no second line
    lines = err.getvalue().splitlines()
    assert lines == [
        "scrape-pipeline: posted 6/10 URLs, 0.8/s, 3 429s, 1 in doubt",
        "scrape-pipeline: posted 7/10 URLs, 1.0/s, 3 429s, 1 in doubt",
    ]
    assert [e.entry.index for e in passed] == [2, 3, 4, 5, 6, 7]


def test_progress_adopted_doubt_is_no_longer_counted_and_batches_are_named():
    clock, err = ManualClock(), io.StringIO()
    progress = Progress(err, clock, every_s=1.0)
    listed = [f"https://example.com/b/{i}" for i in range(30)]
    spec = RunSpec.of(listed, RunMode.BATCH, batch_size=10)
    run = Planned(Run.planned("b", spec, 0.0), True, {})
    with progress.shown(run, lambda: 0):
        progress(event(EventKind.IN_DOUBT, 0))
        clock.advance(2.0)
        progress(event(EventKind.ADOPTED, 0))
    assert err.getvalue().splitlines() == [
        "scrape-pipeline: posted 1/3 batches, 0.5/s, 0 429s, 0 in doubt",
        "scrape-pipeline: posted 1/3 batches, 0.5/s, 0 429s, 0 in doubt",
    ]


def test_progress_of_a_short_run_prints_nothing():
    clock, err = ManualClock(), io.StringIO()
    progress = Progress(err, clock, every_s=5.0)
    with progress.shown(planned(3), lambda: 0):
        clock.advance(1.0)
        progress(event(EventKind.SUBMITTED, 0))
    assert err.getvalue() == ""
