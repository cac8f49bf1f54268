"""The job-list sweep follows the volume: fresh ground first, then pending passes, in one run.

Runs are driven by hand on the manual clock; a "slow" API is a remaining-time callable that
each list page moves (never a real sleep). Outcomes are judged from S3's object versions.
The tests of passes and pages list 10 jobs a page (``small_pages``), not the API's 100: the
same pages and passes from a tenth of the jobs, each of which the stack would process.
"""

from __future__ import annotations

from typing import Any

import pytest

from scrape_pipeline.jobs import Source
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.reconciler.sweeps import Budget, job_list, watch, watch_listing
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, check_exactly_once, versions
from tests.pipeline.test_reconciler import (
    NO_SCHEDULE,
    FakeRemaining,
    Killed,
    ListKiller,
    is_count,
    reconciler,
    settle,
)

PAGE_SECONDS = 10.0  # what one list page costs of the fake remaining time
TWO_PAGES = 15.0  # a budget that lets a sweep start a second page, not a third
BACKLOG_SECONDS = 20 * 3600.0  # inside the first run's 24 h lookback
SLOW_JOB_SECONDS = 1000  # still running when first listed, settled well within WATCH_AFTER


PAGE = 10  # jobs a list page holds in these tests (``small_pages``)


def list_small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweeps list PAGE jobs a page instead of the API's most (100)."""
    for module in (job_list, watch, watch_listing):
        monkeypatch.setattr(module, "JOBS_PAGE_MAX", PAGE)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    list_small_pages(monkeypatch)


def dropped_jobs(stack: LocalStack, count: int, prefix: str) -> list[str]:
    client = stack.client()
    return [client.submit_extract(f"https://example.com/{prefix}/{i}").job_id for i in range(count)]


def slow_list_pages(
    monkeypatch: pytest.MonkeyPatch, found: Reconciler, remaining: FakeRemaining
) -> list[dict[str, Any]]:
    """Every list page costs PAGE_SECONDS of ``remaining``; returns the pages' arguments (the
    count check's one-job pages are neither slow nor returned)."""
    calls: list[dict[str, Any]] = []
    real = found._client.list_jobs

    def list_jobs(**kwargs: Any) -> Any:
        if not is_count(kwargs):
            calls.append(kwargs)
            remaining.seconds -= PAGE_SECONDS
        return real(**kwargs)

    monkeypatch.setattr(found._client, "list_jobs", list_jobs)
    return calls


def stored(stack: LocalStack, job_ids: list[str]) -> list[str]:
    seen = versions(stack)
    return [j for j in job_ids if f"results/extract/{j}/metadata.json" in seen]


def pending_pass(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, *, age: float = 1000.0, **sim: Any
) -> tuple[LocalStack, Reconciler, FakeRemaining, list[dict[str, Any]], ReconcileReport]:
    """25 dropped jobs ``age`` old and a first sweep whose budget lasts two of their three
    list pages; ``sim`` configures the simulator."""
    list_small_pages(monkeypatch)
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE), **sim)
    stack.sim.faults.update(drop_rate=1.0)
    dropped_jobs(stack, 25, "old")
    settle(stack, age)
    found = reconciler(stack)
    remaining = FakeRemaining(1000.0)
    pages = slow_list_pages(monkeypatch, found, remaining)
    first = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, first, Budget(remaining, TWO_PAGES))
    return stack, found, remaining, pages, first


def test_reconciler_run_reads_fresh_ground_and_finishes_a_pending_pass(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN 25 dropped jobs, and a first sweep whose budget lasts two list pages
    stack, found, remaining, pages, first = pending_pass(make_stack, monkeypatch)
    assert (first.list_pages, first.list_passes, first.complete) == (2, 1, False)
    assert first.recovered[Source.JOB_LIST] == 20
    # AND 3 more dropped jobs settle before the next run
    fresh = dropped_jobs(stack, 3, "fresh")
    settle(stack, 700)
    # WHEN the next sweep runs with time to spare
    pages.clear()
    second = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, second, Budget(remaining, 1000.0))
    # THEN it read the fresh ground first (the 3 new jobs, and the overlap below the
    # watermark read again once: here the old jobs, all created at one instant, three pages),
    # then finished the pending pass at its third page, all in the same run
    assert [call["page"] for call in pages] == [1, 2, 3, 3]
    assert (second.list_passes, second.resumed_passes, second.complete) == (1, 1, True)
    assert second.recovered[Source.JOB_LIST] == 3 + 5
    settle(stack, 60)
    assert stored(stack, fresh) == fresh
    assert check_exactly_once(stack) == {"stored": 28}


def test_reconciler_finishing_a_pending_pass_goes_on_with_a_fresh_one(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a pending pass left by a run whose budget lasted two pages
    stack, found, remaining, _, _ = pending_pass(make_stack, monkeypatch)
    # AND jobs submitted just now, not yet past the threshold when the next run starts
    late = dropped_jobs(stack, 2, "late")
    settle(stack, 30)  # settled, younger than the threshold
    # WHEN the next run's pending pass takes long enough for them to come due (each page
    # moves the clock as a slow API would)
    real = found._client.list_jobs
    pages: list[int] = []

    def slow(**kwargs: Any) -> Any:
        if not is_count(kwargs):
            pages.append(kwargs["page"])
            stack.clock.advance(600.0)
        return real(**kwargs)

    monkeypatch.setattr(found._client, "list_jobs", slow)
    report = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, report, Budget(remaining, 1000.0))
    # THEN it read the fresh ground (nothing new: the overlap below the watermark read again
    # once), finished the pending pass at its third page, and went on with a closing fresh
    # pass over what came due meanwhile, all in the same run. The old jobs were all created at
    # one instant, the watermark's: each fresh pass reads them again (the API's date filters
    # have whole seconds, so a pass starts at the watermark's second), three pages here
    assert pages == [1, 2, 3, 3, 1, 2, 3]
    assert report.resumed_passes == 1 and report.list_passes == 2
    assert report.complete is True
    # (the old jobs read again are re-sent too: at 600 s a page their messages look lost)
    assert report.recovered[Source.JOB_LIST] >= 5 + 2
    settle(stack, 60)
    assert stored(stack, late) == late
    assert check_exactly_once(stack) == {"stored": 27}


def test_reconciler_first_run_recovers_fresh_jobs_before_a_day_of_backlog(
    make_stack: MakeStack, small_pages: None
):
    # GIVEN 30 dropped jobs from 20 hours ago, 4 that settled just now, and a reconciler
    # that may read one list page a run (a short budget, as on a busy account)
    stack = make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE, env={"RECONCILE_MAX_PAGES": "1"})
    )
    stack.sim.faults.update(drop_rate=1.0)
    dropped_jobs(stack, 30, "backlog")
    settle(stack, 700)
    stack.clock.advance(BACKLOG_SECONDS)
    fresh = dropped_jobs(stack, 4, "fresh")
    settle(stack, 700)
    found = reconciler(stack)
    # WHEN the very first run reads its one page
    first = found.run()
    settle(stack, 60)
    # THEN the fresh jobs were recovered by it: the day is read newest first
    assert stored(stack, fresh) == fresh
    assert first.complete is False
    # AND jobs that settle later are recovered by the next run, before the backlog is done
    later = dropped_jobs(stack, 4, "later")
    settle(stack, 700)
    second = found.run()
    settle(stack, 60)
    assert stored(stack, later) == later
    assert second.complete is False
    # AND the backlog is read to its end by the runs after, each resuming the pending pass
    runs = [found.run() for _ in range(6)]
    assert runs[-1].complete is True
    assert all(r.list_pages <= 1 for r in [first, second, *runs])
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 38}


def test_reconciler_pending_pass_watches_its_unsettled_jobs_and_never_rereads_them(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN 25 dropped jobs still running when a first sweep reads two of their three pages
    # and runs out of time
    stack, found, remaining, pages, first = pending_pass(
        make_stack,
        monkeypatch,
        age=800.0,
        job_duration_min_s=SLOW_JOB_SECONDS,
        job_duration_max_s=SLOW_JOB_SECONDS + 1,
    )
    assert (first.list_pages, first.recovered[Source.JOB_LIST]) == (2, 0)
    assert first.newly_watched == 20
    pass_end = pages[0]["end_date"]
    # WHEN the next run finishes the pending pass while they still run
    second = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, second, Budget(remaining, 1000.0))
    # THEN the last 5 are watched too, and the pass is done: no page of it is read again
    assert (second.newly_watched, second.recovered[Source.JOB_LIST]) == (5, 0)
    assert second.complete is True
    pages.clear()
    settle(stack, 300)  # they settle
    third = found.run()
    assert not [p for p in pages if p.get("end_date") == pass_end]
    # AND the watch sweep wakes all 25 in one run, from one list of the unsettled jobs
    assert third.recovered["watch"] == 25
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 25}


def test_reconciler_fresh_ground_leaves_half_the_run_to_older_passes(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a pass left pending with one page to go (25 dropped jobs, two pages read)
    stack, found, remaining, pages, _ = pending_pass(make_stack, monkeypatch)
    old_end = pages[0]["end_date"]
    # AND five pages of fresh ground: 50 more dropped jobs, due now
    dropped_jobs(stack, 50, "fresh")
    settle(stack, 200)
    # WHEN a run's budget would let the fresh ground alone take all of it (3.5 pages)
    pages.clear()
    report = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, report, Budget(remaining, 35.0))
    # THEN the fresh pass stopped at half, and the old pass got its last page: a backlog
    # drains even while every run's new ground could fill the run
    assert [p["page"] for p in pages if p["end_date"] == old_end] == [3]
    assert len([p for p in pages if p["end_date"] != old_end]) >= 2
    assert report.recovered[Source.JOB_LIST] >= 5 + 20


def lagging_stack(make_stack: MakeStack, lag: tuple[float, float], **sim: Any) -> LocalStack:
    """A stack run by hand whose jobs settle in a second or two and are listed ``lag`` (min,
    max) late; ``sim`` configures the simulator further."""
    return make_stack(
        StackSettings(reconcile_interval=NO_SCHEDULE),
        job_duration_min_s=1,
        job_duration_max_s=2,
        listing_lag_min_s=lag[0],
        listing_lag_max_s=lag[1],
        **sim,
    )


def submitted_every_few_seconds(
    stack: LocalStack, count: int, *, every: float
) -> tuple[list[str], list[ReconcileReport]]:
    """``count`` jobs submitted ``every`` seconds apart, every webhook lost, and a reconciler
    run every minute meanwhile and for ten minutes after: the jobs and the runs' reports."""
    stack.sim.faults.update(drop_rate=1.0)
    found, client = reconciler(stack), stack.client()
    jobs: list[str] = []
    reports: list[ReconcileReport] = []
    for step in range(count):
        jobs.append(client.submit_extract(f"https://example.com/late/{step}").job_id)
        stack.step(every)
        if (step + 1) * every // 60 > step * every // 60:  # a minute has turned
            reports.append(found.run())
    for _ in range(10):
        settle(stack, 60)
        reports.append(found.run())
    settle(stack, 60)
    return jobs, reports


@pytest.mark.parametrize(
    ("lag", "offset"),
    [((280.0, 300.0), 0.0), ((0.0, 0.0), -120.0)],
    ids=["listed-five-minutes-late", "api-clock-two-minutes-behind"],
)
def test_reconciler_job_list_loses_no_job_listed_late(
    make_stack: MakeStack, lag: tuple[float, float], offset: float
):
    # GIVEN an API that lists each job minutes after its created_at (or whose clock is behind
    # Lambda's), every webhook lost, and a reconciler run every minute
    stack = lagging_stack(make_stack, lag, api_clock_offset_s=offset)
    # WHEN jobs are submitted for five minutes, one every 5 s (closer than the lag's spread)
    jobs, reports = submitted_every_few_seconds(stack, 60, every=5.0)
    # THEN every job is stored once
    assert len(stored(stack, jobs)) == len(jobs)
    assert check_exactly_once(stack) == {"stored": len(jobs)}
    # AND a lag that differs from job to job was measured (jobs listed out of creation order)
    if lag[1] > lag[0]:
        assert 0 < max(r.listing_lag for r in reports) <= lag[1] - lag[0] + 1


def test_reconciler_run_killed_mid_pass_keeps_the_pages_it_read(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, small_pages: None
):
    # GIVEN 25 dropped jobs created a second apart (three list pages), all settled
    stack = make_stack(StackSettings(reconcile_interval=NO_SCHEDULE))
    stack.sim.faults.update(drop_rate=1.0)
    client = stack.client()
    for i in range(25):
        client.submit_extract(f"https://example.com/killed/{i}")
        stack.clock.advance(1.0)
    settle(stack, 700)
    found = reconciler(stack)
    killer = ListKiller(monkeypatch, found, found.sweeps[Source.JOB_LIST]._books, at=2)
    # WHEN a run is killed during its second page
    with pytest.raises(Killed):
        found.run_sweep(Source.JOB_LIST, ReconcileReport())
    first_range = (killer.reads[0]["start_date"], killer.reads[0]["end_date"])
    # AND the next run starts (a new container)
    killer.revive()
    report = ReconcileReport()
    found.run_sweep(Source.JOB_LIST, report)
    # THEN it went on from the page it was killed in: the page before is not read again
    reads = [(r.get("start_date"), r.get("end_date"), r["page"]) for r in killer.reads]
    assert [page for *bounds, page in reads if tuple(bounds) == first_range] == [2, 3]
    assert sum(1 for *bounds, _ in reads if tuple(bounds) != first_range) <= 1
    settle(stack, 60)
    assert check_exactly_once(stack) == {"stored": 25}


RAMP_JOBS = 60  # one every 20 s: 20 minutes of submissions
RAMP_LAG = (0.0, 300.0)  # each job listed up to five minutes late, once the lag has grown
RAMP_SECONDS = 900.0  # from no lag at all to the whole spread, over 15 minutes


def test_reconciler_job_list_follows_a_listing_lag_that_grows(make_stack: MakeStack):
    # GIVEN an API that lists jobs on time at first, then later and later: after 15 minutes
    # each job is listed up to five minutes late, jobs listed out of creation order by far more
    # than the 30 s overlap; every webhook lost, and a reconciler run every minute
    stack = lagging_stack(make_stack, RAMP_LAG, listing_lag_ramp_s=RAMP_SECONDS)
    # WHEN jobs are submitted for 20 minutes, one every 20 s
    jobs, reports = submitted_every_few_seconds(stack, RAMP_JOBS, every=20.0)
    # THEN every job is stored once (11 of 60 were lost before the count check: listed late
    # below an overlap that widened only with what it re-read)
    assert len(stored(stack, jobs)) == len(jobs), f"{len(jobs) - len(stored(stack, jobs))} lost"
    assert check_exactly_once(stack) == {"stored": len(jobs)}
    # AND at a cost the simulator counts: the job list's pages (they carry a start date) and
    # its counts (pages of one job, two before each fresh pass), the overlap widened to twice
    # the lag measured, and the ranges whose count grew read again
    asked = [p for p in stack.sim.list_requests() if p["start"] is not None]
    pages = [p for p in asked if p["page_size"] > 1]
    counts = len(asked) - len(pages)
    lags = [round(r.listing_lag) for r in reports]
    assert lags[-1] > 60, lags
    assert counts <= 2 * len(reports) + 2
    # (here 32 pages and 59 counts for 30 runs; 30 pages before, and 11 jobs lost)
    assert len(pages) <= 2 * len(reports), (len(pages), len(reports))
