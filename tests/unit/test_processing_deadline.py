"""The processor's view of its deadline: a stop margin that never eats the whole invocation."""

from __future__ import annotations

import pytest

from scrape_pipeline.budget import MAX_MARGIN_SHARE
from scrape_pipeline.processing import Deadline


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
