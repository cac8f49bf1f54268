"""Time budgets measured on a remaining-time callable: shares, and time flowing on."""

from __future__ import annotations

from scrape_pipeline.budget import Budget, unlimited


class Remaining:
    """Seconds left, moved by hand."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


def test_budget_is_spent_once_its_seconds_have_gone():
    left = Remaining(100.0)
    budget = Budget(left, 30.0)
    left.seconds = 71.0
    assert not budget.spent()
    left.seconds = 70.0
    assert budget.spent()


def test_shares_split_what_is_left_and_unused_time_flows_to_the_next():
    left = Remaining(100.0)
    run = Budget(left, 100.0)
    weights = [0.2, 0.4, 0.4]
    first = run.share(weights)
    assert first.left() == 20.0
    left.seconds -= 5.0  # the first step used 5 of its 20 s
    second = run.share(weights[1:])
    assert second.left() == 47.5  # half of the 95 s left, not 40
    left.seconds -= 47.5
    last = run.share(weights[2:])
    assert last.left() == 47.5  # the last step takes all that is left
    assert not last.spent()


def test_no_deadline_is_never_spent():
    budget = Budget(unlimited, 0.0)
    assert not budget.spent()
    assert not budget.share([1.0, 1.0]).spent()
