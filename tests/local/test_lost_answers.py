"""The demo's lost-answer figures: armed only around the pipeline's steps, timed from the
simulator's log of lost POSTs to the journal's first naming of their jobs."""

from __future__ import annotations

from collections.abc import Callable

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.lost_answers import LostAnswers
from scrape_pipeline_local.simulator.config import FaultSettings
from scrape_pipeline_local.simulator.faults import Faults, LostAnswer

RUN = ("https://demo.example/page/8", "https://demo.example/page/9")


def _faults(clock: ManualClock) -> Faults:
    return Faults(FaultSettings(), seed=1, clock=clock)


def test_answers_are_lost_only_while_armed():
    faults = _faults(ManualClock(start=0.0))
    lost = LostAnswers(faults, 1.0, RUN)
    assert faults.lost_answer("POST /v1/extract") is None  # the demo's own POST
    with lost.armed():
        assert faults.lost_answer("POST /v1/extract") in (504, "timeout")
        assert faults.lost_answer("POST /v1/batch") in (504, "timeout")
        assert faults.lost_answer("GET /v1/extract/{job_id}") is None
    assert faults.lost_answer("POST /v1/batch") is None


def test_doubt_runs_from_the_lost_post_to_the_journals_first_naming():
    clock = ManualClock(start=100.0)
    faults = _faults(clock)
    lost = LostAnswers(faults, 0.05, RUN)
    faults.note_lost(LostAnswer(100.0, "POST /v1/extract", "job-a", RUN[:1], first_post=True))
    faults.note_lost(LostAnswer(105.0, "POST /v1/extract", "job-b", RUN[1:], first_post=True))
    # a resubmission's lost answer and a direct URL's: counted, never timed by the journal
    faults.note_lost(LostAnswer(110.0, "POST /v1/extract", "job-c", RUN[:1], first_post=False))
    faults.note_lost(
        LostAnswer(110.0, "POST /v1/extract", "job-d", ("https://demo.example/page/1",), True)
    )
    reads: list[float] = []

    def journal(named: set[str], at: float) -> Callable[[], set[str]]:
        def read() -> set[str]:
            reads.append(at)
            return named

        return read

    lost.follow(journal(set(), 200.0), 200.0)
    lost.follow(journal({"job-a"}, 400.0), 400.0)
    lost.follow(journal({"job-a", "job-b"}, 430.0), 430.0)
    lost.follow(journal({"job-a", "job-b"}, 500.0), 500.0)  # nothing waits: not read
    assert reads == [200.0, 400.0, 430.0]
    submissions = {RUN[0]: 2, RUN[1]: 1, "https://demo.example/page/1": 1}
    truth = [{"url": RUN[0], "status": "failed", "retryable": True}]
    found = lost.figures(submissions, truth)
    assert (found.lost, found.in_runs, found.unadopted) == (4, 2, 0)
    assert sorted(found.doubt) == [300.0, 325.0]
    assert dict(found.posts_per_url) == {1: 2}  # RUN[0] retried for its own failure: aside
    assert found.posts_max == 1 and not found.failed


def test_a_url_posted_twice_or_a_lost_answer_never_adopted_fails():
    faults = _faults(ManualClock(start=0.0))
    lost = LostAnswers(faults, 0.05, RUN)
    faults.note_lost(LostAnswer(0.0, "POST /v1/extract", "job-a", RUN[:1], first_post=True))
    found = lost.figures({RUN[0]: 2}, [])
    assert found.posts_max == 2 and found.unadopted == 1 and found.failed
    assert ("URLS POSTED MORE THAN ONCE", "1") in found.rows()
    assert ("LOST ANSWERS NEVER ADOPTED", "1") in found.rows()
