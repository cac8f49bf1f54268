"""The processor's view of its deadline: a stop margin that never eats the whole invocation."""

from __future__ import annotations

import pytest

from scrape_pipeline.processor.deadline import MAX_MARGIN_SHARE, Deadline


class Remaining:
    """Seconds left, moved by hand (no real time passes)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


@pytest.mark.parametrize(
    ("timeout", "stop_margin", "margin"),
    [
        (60.0, 10.0, 10.0),  # the template's processor: the configured margin
        (5.0, 10.0, 5.0 * MAX_MARGIN_SHARE),  # a short timeout: a quarter of it, not all of it
        (0.3, 10.0, 0.3 * MAX_MARGIN_SHARE),
    ],
)
def test_deadline_margin_is_at_most_a_quarter_of_the_invocation(
    timeout: float, stop_margin: float, margin: float
):
    remaining = Remaining(timeout)
    deadline = Deadline.of_invocation(remaining, stop_margin)
    assert deadline.margin == pytest.approx(margin)
    assert not deadline.near()  # a fresh invocation always has time to start a job
    remaining.seconds = margin * 1.01
    assert not deadline.near()
    remaining.seconds = margin * 0.99
    assert deadline.near()


def test_deadline_starts_a_page_only_if_the_margin_and_the_longest_page_fit():
    # GIVEN a 60 s invocation with a 10 s margin
    remaining = Remaining(60.0)
    deadline = Deadline.of_invocation(remaining, 10.0)
    # WHEN no page was timed yet, the margin alone is the floor
    remaining.seconds = 10.0
    assert deadline.room_for_page()
    # AND a page timed at 8 s (50 s to 42 s) raises the bar to 10 + 1.5 x 8 = 22 s
    remaining.seconds = 50.0
    deadline.start_page()
    remaining.seconds = 42.0
    deadline.end_page()
    assert deadline.longest_page == pytest.approx(8.0)
    remaining.seconds = 22.5
    assert deadline.room_for_page()
    remaining.seconds = 21.5
    assert not deadline.room_for_page()
    # AND a page an earlier attempt timed longer counts too (the first page of this one)
    remaining.seconds = 30.0
    assert not deadline.room_for_page(expected=14.0)  # 10 + 21 = 31 s needed
    # AND a shorter page later does not lower the bar
    deadline.start_page()
    remaining.seconds = 29.0
    deadline.end_page()
    assert deadline.longest_page == pytest.approx(8.0)


def test_deadline_tries_a_page_longer_than_any_invocation_only_at_the_start_of_one():
    # GIVEN pages timed at 50 s and 60 s invocations: margin + 1.5 x 50 s never fits
    remaining = Remaining(60.0)
    deadline = Deadline.of_invocation(remaining, 10.0)
    # THEN the page is started while the invocation is fresh (all but its margin left) ...
    remaining.seconds = 50.0
    assert deadline.room_for_page(expected=50.0)
    # ... and never later in it
    remaining.seconds = 49.0
    assert not deadline.room_for_page(expected=50.0)
