"""The submitter against the simulator over real HTTP, judged by the simulator's record of
POSTs per URL (``Simulator.submissions``), never by the journal's own word."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.models import SubmittedJob
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.geonode.settings import GeonodeSettings
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline.runs.report import Event, EventKind, RunReport
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.integration.test_client_simulator import KEY, start

S = EntryState


class Crash(BaseException):
    """A kill: not an Exception, so nothing in the submitter catches it."""


def urls(tag: str, n: int) -> list[str]:
    return [f"https://example.com/runs/{tag}/{i}" for i in range(n)]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    opened = SqliteJournal(tmp_path / "journal.sqlite3")
    yield opened
    opened.close()


class CrashingClient:
    """The client, killed on its ``nth`` POST: before sending it, or with the answer in hand."""

    def __init__(self, client: GeonodeClient, nth: int, when: str) -> None:
        self._client = client
        self._nth = nth
        self._when = when
        self._posts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def submit_extract(self, url: str, **options: Any) -> SubmittedJob:
        self._posts += 1
        if self._posts == self._nth and self._when == "before_send":
            raise Crash
        job = self._client.submit_extract(url, **options)
        if self._posts == self._nth and self._when == "after_answer":
            raise Crash
        return job


def submitter(journal: SqliteJournal, client: Any, clock: ManualClock, **kw: Any) -> Submitter:
    return Submitter(journal, client, clock=clock, pace=Pace(clock), rng=random.Random(2), **kw)


def once_each(server: SimulatorServer, posted: list[str]) -> None:
    """The simulator created exactly one job for each URL."""
    submissions = server.sim.submissions()
    assert {url: submissions.get(url, 0) for url in posted} == dict.fromkeys(posted, 1)


def job_ids(server: SimulatorServer, kind: str = "extract") -> dict[str, str]:
    return {j["url"]: j["job_id"] for j in server.sim.truth_jobs(kind)}


# -- plain runs ----------------------------------------------------------------------------


def test_submitter_posts_each_url_once_and_a_rerun_posts_nothing(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN five URLs, one of them listed twice
    listed = urls("plain", 5)
    spec = RunSpec.of([*listed, listed[0]], RunMode.ASYNC, {"formats": ["markdown"]})
    # WHEN they are submitted, then the same run is submitted again
    first = submitter(journal, client, clock).submit(spec)
    again = submitter(journal, client, clock).submit(spec)
    # THEN each URL was POSTed once, the rerun posted nothing and said what it found
    once_each(server, listed)
    assert first.complete and first.posts == 5 and first.planned_now
    assert again.posts == 0 and not again.planned_now
    assert again.resumed == {S.SUBMITTED: 5} and again.run.name == first.run.name
    assert {e.urls[0]: e.job_id for e in again.entries} == job_ids(server)


def test_submitter_rejected_url_keeps_the_api_reason_and_the_rest_go_on(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    good = urls("rejected", 2)
    spec = RunSpec.of([good[0], "https://:80", good[1]], RunMode.ASYNC)
    report = submitter(journal, client, clock).submit(spec)
    once_each(server, good)
    [rejected] = report.where(S.REJECTED)
    assert rejected.urls == ("https://:80",) and (rejected.reason or "").startswith("HTTP 422")
    assert report.counts == {S.SUBMITTED: 2, S.REJECTED: 1}


# -- crashes -------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before_send", "after_answer"])
def test_submitter_rerun_after_a_crash_mid_post_posts_only_the_rest(
    server: SimulatorServer,
    client: GeonodeClient,
    journal: SqliteJournal,
    clock: ManualClock,
    when: str,
):
    # GIVEN a run killed on its third POST (before it left, or with its answer unrecorded)
    posted = urls(f"crash-{when}", 5)
    spec = RunSpec.of(posted, RunMode.ASYNC)
    with pytest.raises(Crash):
        submitter(journal, CrashingClient(client, 3, when), clock).submit(spec)
    # WHEN the same run is submitted again by a new process
    events: list[Event] = []
    report = submitter(journal, client, clock, listener=events.append).submit(spec)
    # THEN it waited out the dead submitter's lease, settled that entry by a lookup,
    # and every URL was POSTed once in all
    once_each(server, posted)
    assert report.complete
    assert {e.urls[0]: e.job_id for e in report.entries} == job_ids(server)
    kinds = [e.kind for e in events if e.entry.index == 2]
    assert kinds[:2] == [EventKind.WAITING, EventKind.IN_DOUBT]
    expected = EventKind.ADOPTED if when == "after_answer" else EventKind.SUBMITTED
    assert kinds[-1] is expected
    assert report.posts == (2 if when == "after_answer" else 3)


def test_submitter_crash_after_recording_posts_only_the_rest(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    posted = urls("crash-recorded", 4)
    spec = RunSpec.of(posted, RunMode.ASYNC)

    def kill_on_second(event: Event) -> None:
        if event.kind is EventKind.SUBMITTED and event.entry.index == 1:
            raise Crash

    with pytest.raises(Crash):
        submitter(journal, client, clock, listener=kill_on_second).submit(spec)
    report = submitter(journal, client, clock).submit(spec)
    once_each(server, posted)
    assert report.complete and report.posts == 2 and report.resumed[S.SUBMITTED] == 2


# -- lost answers --------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [504, 502, "timeout"])
def test_submitter_lost_extract_answer_is_adopted_from_the_job_list(
    server: SimulatorServer,
    client: GeonodeClient,
    journal: SqliteJournal,
    clock: ManualClock,
    answer: Any,
):
    # GIVEN the API creates the first job, then its answer is lost (a 5xx, or none at all)
    posted = urls(f"lost-{answer}", 3)
    server.sim.faults.lose_answers("POST /v1/extract", [answer])
    events: list[Event] = []
    first = posted[0]
    report = submitter(journal, client, clock, listener=events.append).submit(
        RunSpec.of(posted, RunMode.ASYNC)
    )
    # THEN the job was found in the job list and adopted, not posted again
    once_each(server, posted)
    assert report.complete and report.posts == 3
    assert {e.urls[0]: e.job_id for e in report.entries} == job_ids(server)
    [doubt] = [e for e in events if e.kind is EventKind.IN_DOUBT]
    assert doubt.entry.urls == (first,)
    assert [e.entry.urls for e in events if e.kind is EventKind.ADOPTED] == [(first,)]


def test_submitter_extract_whose_client_timed_out_is_adopted(
    clock: ManualClock, journal: SqliteJournal
):
    # GIVEN the API creates the job, then holds the answer past the client's read timeout
    server = start(clock, lost_answer_hold_s=1.0)
    try:
        server.sim.faults.lose_answers("POST /v1/extract", ["timeout"])
        settings = GeonodeSettings(base_url=server.base_url, timeout_seconds=0.3)
        with GeonodeClient(KEY, settings=settings, clock=clock) as client:
            events: list[Event] = []
            posted = urls("read-timeout", 2)
            report = submitter(journal, client, clock, listener=events.append).submit(
                RunSpec.of(posted, RunMode.ASYNC)
            )
        # THEN the client's timeout put it in doubt, and the job list resolved it
        [doubt] = [e for e in events if e.kind is EventKind.IN_DOUBT]
        assert "no answer in time" in (doubt.entry.reason or "")
        assert [e.entry.index for e in events if e.kind is EventKind.ADOPTED] == [0]
        assert report.complete
        once_each(server, posted)
    finally:
        server.stop()


def test_submitter_batch_in_doubt_is_reported_never_reposted(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    posted = urls("lost-batch", 30)
    server.sim.faults.lose_answers("POST /v1/batch", [502])
    spec = RunSpec.of(posted, RunMode.BATCH, batch_size=10)
    report = submitter(journal, client, clock).submit(spec)
    again = submitter(journal, client, clock).submit(spec)
    once_each(server, posted)
    assert report.posts == 3 and report.counts == {S.IN_DOUBT: 1, S.SUBMITTED: 2}
    assert [e.index for e in again.where(S.IN_DOUBT)] == [0]
    assert again.posts == 0 and not again.complete


# -- the API's pace and balance --------------------------------------------------------------


def test_submitter_honours_retry_after_through_the_injected_clock(
    server: SimulatorServer, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN two 429s (Retry-After: 1) and a client that leaves retrying to the submitter
    server.sim.faults.burst(count=2, status=429, route="POST /v1/extract")
    policy = RetryPolicy(max_attempts=1)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=policy) as client:
        posted = urls("throttled", 3)
        report = submitter(journal, client, clock).submit(RunSpec.of(posted, RunMode.ASYNC))
    # Each Retry-After waited in full, then the pace's slots at the rate halved twice (5/s)
    assert clock.sleeps[:2] == [1.0, 1.0]
    assert all(0 < s <= 0.2 + 1e-6 for s in clock.sleeps[2:])
    assert report.complete and report.posts == 5
    once_each(server, posted)


def test_submitter_splits_2500_urls_into_3_batches(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    posted = urls("big-batch", 2500)
    report = submitter(journal, client, clock).submit(RunSpec.of(posted, RunMode.BATCH))
    items = server.sim.truth_jobs("batch_item")
    by_batch: dict[str, int] = {}
    for item in items:
        by_batch[item["job_id"]] = by_batch.get(item["job_id"], 0) + 1
    assert sorted(by_batch.values()) == [500, 1000, 1000]
    assert report.complete and report.posts == 3
    assert {e.job_id for e in report.entries} == set(by_batch)
    once_each(server, posted)


# -- announcing batches and crawls ---------------------------------------------------------------


def test_submitter_announces_each_crawl_once_even_after_a_crash_between(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    posted = urls("crawl", 3)
    spec = RunSpec.of(posted, RunMode.CRAWL, {"max_pages": 1})
    announced: list[tuple[str, str]] = []

    def announce_then_die(kind: str, job_id: str) -> None:
        if len(announced) == 1:
            raise Crash  # the second crawl is recorded but not announced
        announced.append((kind, job_id))

    with pytest.raises(Crash):
        submitter(journal, client, clock, announce=announce_then_die).submit(spec)
    report: RunReport = submitter(
        journal, client, clock, announce=lambda k, j: announced.append((k, j))
    ).submit(spec)
    once_each(server, posted)
    assert sorted(announced) == sorted(("crawl", e.job_id or "") for e in report.entries)
    assert all(e.announced for e in report.entries)


def test_submitter_stop_cuts_the_call_and_the_next_call_posts_only_the_rest(
    server: SimulatorServer, client: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN a caller whose deadline comes after two POSTs (a Lambda near its timeout)
    posted = urls("cut", 5)
    spec = RunSpec.of(posted, RunMode.ASYNC, {"formats": ["markdown"]})
    first_call = submitter(journal, client, clock)
    # WHEN it works the run with that stop, then another call works it without one
    cut = first_call.work(
        first_call.plan(spec), time_left=lambda: 0.0 if first_call._posts >= 2 else 1e9
    )
    rest = submitter(journal, client, clock).submit(spec)
    # THEN the first call stopped with three left planned, and the URLs were posted once each
    assert cut.cut and cut.posts == 2 and len(cut.where(S.PLANNED)) == 3 and not cut.complete
    assert rest.complete and rest.posts == 3 and not rest.cut
    once_each(server, posted)
