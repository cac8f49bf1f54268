"""Time budgets measured on a remaining-time callable: shares, and time flowing on."""

from __future__ import annotations

from scrape_pipeline.reconciler.sweeps import Budget, unlimited


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


def test_page_cap_is_spent_once_the_pages_read_reach_it():
    # GIVEN a budget with an hour of time and a cap of three pages
    budget = Budget(Remaining(3600.0), 3600.0).capped(3)
    # THEN the question "out of time, or at the cap?" is one call with the pages read
    assert [budget.spent(read) for read in range(5)] == [False, False, False, True, True]


def test_a_capped_budget_keeps_the_time_of_the_one_it_caps():
    # GIVEN a budget of 30 s capped at a thousand pages
    left = Remaining(100.0)
    budget = Budget(left, 30.0).capped(1000)
    # WHEN 30 s go by THEN it is spent, pages or no pages
    left.seconds = 71.0
    assert not budget.spent(0)
    left.seconds = 70.0
    assert budget.spent(0)


def test_shares_of_a_capped_budget_count_against_the_same_cap():
    # GIVEN a budget with no deadline capped at ten pages, split in two
    budget = Budget(unlimited, 0.0).capped(10)
    half = budget.share([1.0, 1.0])
    # THEN the share is bounded by the same count of pages, and a tighter cap wins
    assert not half.spent(9) and half.spent(10)
    assert half.capped(4).spent(4) and not half.capped(40).spent(9)
    assert half.capped(40).spent(10)


def test_no_deadline_and_no_cap_is_never_spent():
    assert not Budget.no_deadline().spent(10**9)
