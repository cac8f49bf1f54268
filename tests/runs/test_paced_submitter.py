"""The submitter with several workers at the pace's rate, against the simulator over real HTTP
with a low rate limit; kills and Ctrl-C with POSTs in flight; a dead holder's lease. Judged by
the simulator's record of POSTs per URL, never by the journal's own word."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.models import SubmittedJob
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.journal import HOLDER_GONE
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace, PaceSettings, holder_gone
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline.runs.report import Event, EventKind
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.integration.test_client_simulator import KEY, start

S = EntryState
NO_RETRY = RetryPolicy(max_attempts=1)  # 429s reach the submitter, as the CLI sets it


class Crash(BaseException):
    """A kill: not an Exception, so nothing in the submitter catches it."""


def urls(tag: str, n: int) -> list[str]:
    return [f"https://example.com/paced/{tag}/{i}" for i in range(n)]


def once_each(server: SimulatorServer, posted: list[str]) -> None:
    submissions = server.sim.submissions()
    assert {url: submissions.get(url, 0) for url in posted} == dict.fromkeys(posted, 1)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    opened = SqliteJournal(tmp_path / "journal.sqlite3")
    yield opened
    opened.close()


@pytest.fixture
def limited(clock: ManualClock) -> Iterator[SimulatorServer]:
    """The simulator with a low limit: 5 requests/s, a burst of 5."""
    server = start(clock, rate_limit_per_s=5, rate_limit_burst=5)
    yield server
    server.stop()


def paced(
    journal: SqliteJournal, client: Any, clock: ManualClock, workers: int = 4, **kw: Any
) -> Submitter:
    pace = Pace(clock, settings=PaceSettings(workers=workers, start_rate=2.0))
    return Submitter(journal, client, clock=clock, rng=random.Random(3), pace=pace, **kw)


class SlowClient:
    """The client with 200 ms of network per POST on the manual clock (so that the pace puts
    several in flight), killed (``raising``) on its ``nth`` POST after the API acted on it."""

    def __init__(
        self,
        client: GeonodeClient,
        clock: ManualClock,
        nth: int = 0,
        raising: type[BaseException] = BaseException,
    ) -> None:
        self._client = client
        self._clock = clock
        self._nth = nth
        self._raising = raising
        self._posts = 0
        self._lock = threading.Lock()
        self._now_in_flight = 0
        self.most_in_flight = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def submit_extract(self, url: str, **options: Any) -> SubmittedJob:
        with self._lock:
            self._posts += 1
            mine = self._posts
            self._now_in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._now_in_flight)
        try:
            self._clock.advance(0.2)
            job = self._client.submit_extract(url, **options)
        finally:
            with self._lock:
                self._now_in_flight -= 1
        if mine == self._nth:
            raise self._raising
        return job


def test_paced_workers_stay_near_a_low_limit_and_post_each_url_once(
    limited: SimulatorServer, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN 150 URLs, four workers and an API that admits 5 requests/s (30 s of its limit)
    posted = urls("low-limit", 150)
    started = clock.time()
    with GeonodeClient(KEY, base_url=limited.base_url, clock=clock, retry=NO_RETRY) as client:
        slow = SlowClient(client, clock)
        submitter = paced(journal, slow, clock)
        report = submitter.submit(RunSpec.of(posted, RunMode.ASYNC))
    # THEN every URL was posted once, few POSTs were throttled (a serial run without a pace
    # is answered 429 once in six here), and the run kept near the limit
    once_each(limited, posted)
    assert report.complete
    throttled = limited.sim.stats.snapshot()["by_status"].get("429", 0)
    assert throttled == submitter.throttled
    assert throttled <= 10
    assert clock.time() - started <= 2 * len(posted) / 5
    assert slow.most_in_flight > 1


def test_paced_kill_with_workers_in_flight_then_rerun_posts_nothing_twice(
    server: SimulatorServer, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN eight workers, killed on the 10th POST with the others' POSTs in flight
    posted = urls("kill", 40)
    spec = RunSpec.of(posted, RunMode.ASYNC)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=NO_RETRY) as client:
        killed = SlowClient(client, clock, 10, Crash)
        with pytest.raises(Crash):
            paced(journal, killed, clock, workers=8).submit(spec)
        left = {e.state for e in journal.entries(spec.derived_name())}
        # WHEN the same run is submitted again
        report = paced(journal, client, clock, workers=8).submit(spec)
    # THEN the kill stopped the claiming, and in all every URL was posted once
    assert killed.most_in_flight > 1
    assert S.PLANNED in left
    once_each(server, posted)
    assert report.complete


@pytest.mark.parametrize("workers", [1, 4])
def test_ctrl_c_mid_post_leaves_the_entry_in_doubt_at_once(
    server: SimulatorServer, journal: SqliteJournal, clock: ManualClock, workers: int
):
    # GIVEN Ctrl-C while the third POST's answer is on its way (the API acted)
    posted = urls(f"ctrl-c-{workers}", 6)
    spec = RunSpec.of(posted, RunMode.ASYNC)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=NO_RETRY) as client:
        with pytest.raises(KeyboardInterrupt):
            killed = SlowClient(client, clock, 3, KeyboardInterrupt)
            paced(journal, killed, clock, workers=workers).submit(spec)
        doubts = journal.entries(spec.derived_name(), [S.IN_DOUBT])
        started = clock.time()
        events: list[Event] = []
        report = paced(journal, client, clock, listener=events.append).submit(spec)
    # THEN it was in doubt at once, the rerun waited for no lease and adopted the job
    assert len(doubts) == 1 and "Ctrl-C" in (doubts[0].reason or "")
    assert EventKind.WAITING not in {e.kind for e in events}
    assert clock.time() - started < journal.lease_s
    assert [e.entry.index for e in events if e.kind is EventKind.ADOPTED] == [doubts[0].index]
    once_each(server, posted)
    assert report.complete


def dead_owner() -> str:
    """An owner token of this host whose process has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return f"{socket.gethostname()}:{process.pid}:deadbeef"


def test_holder_gone_only_for_a_dead_pid_of_this_host():
    assert holder_gone(dead_owner())
    assert not holder_gone(f"{socket.gethostname()}:1:abcd")  # init is alive
    assert not holder_gone("another-host:999999:abcd")
    assert not holder_gone(None) and not holder_gone("garbage")


@pytest.mark.parametrize("mode", [RunMode.ASYNC, RunMode.BATCH])
def test_a_dead_submitter_s_lease_is_abandoned_at_once(
    server: SimulatorServer,
    client: GeonodeClient,
    journal: SqliteJournal,
    clock: ManualClock,
    mode: RunMode,
):
    # GIVEN an entry a process of this host claimed, then died before posting it
    posted = urls(f"dead-{mode}", 3)
    spec = RunSpec.of(posted, mode, batch_size=1)
    submitter = paced(journal, client, clock, workers=2)
    planned = submitter.plan(spec)
    first = journal.entries(planned.run.name)[0]
    journal.claim(first, dead_owner(), clock.time())
    started = clock.time()
    events: list[Event] = []
    doubted_at: list[float] = []

    def listen(event: Event) -> None:
        events.append(event)
        if event.kind is EventKind.IN_DOUBT:
            doubted_at.append(clock.time())

    report = paced(journal, client, clock, workers=2, listener=listen).work(planned)
    # THEN no lease was waited out: the entry went to doubt at once, never back to planned
    # (an extract's look-up then waits for the job list to cover the claim, not for the lease)
    assert doubted_at and doubted_at[0] - started < journal.lease_s
    assert EventKind.WAITING not in {e.kind for e in events}
    [doubt] = [e for e in events if e.kind is EventKind.IN_DOUBT]
    assert doubt.entry.index == 0 and doubt.entry.reason == HOLDER_GONE
    if mode is RunMode.ASYNC:
        # an extract is looked up (nothing found: it was never sent) and posted once
        assert report.complete
        once_each(server, posted)
    else:
        # a batch in doubt is the operator's: never posted again
        assert report.counts == {S.IN_DOUBT: 1, S.SUBMITTED: 2}
        once_each(server, posted[1:])


def test_paced_lookup_is_tried_again_after_a_503_though_the_client_does_not_retry(
    server: SimulatorServer, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN the first POST's answer lost after the API acted, and the job list's first
    # answer a 503, with a client that retries nothing (as the CLI's)
    posted = urls("lookup-503", 3)
    server.sim.faults.lose_answers("POST /v1/extract", [502])
    server.sim.faults.burst(count=1, status=503, route="GET /v1/extract/jobs")
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=NO_RETRY) as client:
        events: list[Event] = []
        report = paced(journal, client, clock, listener=events.append).submit(
            RunSpec.of(posted, RunMode.ASYNC)
        )
    # THEN the lookup was tried again and the job adopted, nothing posted twice
    assert server.sim.stats.snapshot()["by_status"].get("503") == 1
    assert [e.entry.index for e in events if e.kind is EventKind.ADOPTED] == [0]
    assert report.complete
    once_each(server, posted)


def test_paced_stop_cuts_every_worker_and_the_next_call_posts_only_the_rest(
    server: SimulatorServer, journal: SqliteJournal, clock: ManualClock
):
    # GIVEN a caller whose deadline comes after five POSTs, with several in flight
    posted = urls("cut", 40)
    spec = RunSpec.of(posted, RunMode.ASYNC)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=NO_RETRY) as client:
        slow = SlowClient(client, clock)
        first = paced(journal, slow, clock, workers=8)
        cut = first.work(first.plan(spec), time_left=lambda: 0.0 if first._posts >= 5 else 1e9)
        rest = paced(journal, client, clock, workers=8).submit(spec)
    # THEN no worker claimed after the stop (only those in flight finished), and the next
    # call posted the rest: every URL once
    assert cut.cut and 5 <= cut.posts < 5 + 8 and not cut.complete
    assert len(cut.where(S.PLANNED)) == 40 - cut.posts
    assert rest.complete and rest.posts == 40 - cut.posts
    once_each(server, posted)


def test_paced_402_stops_every_worker_and_a_rerun_after_top_up_finishes(
    clock: ManualClock, journal: SqliteJournal
):
    server = start(clock, balance_tokens=10)
    try:
        posted = urls("balance", 30)
        spec = RunSpec.of(posted, RunMode.ASYNC)
        with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=NO_RETRY) as client:
            slow = SlowClient(client, clock)
            stopped = paced(journal, slow, clock, workers=8).submit(spec)
            assert stopped.stopped is not None and stopped.counts[S.SUBMITTED] == 10
            assert stopped.counts[S.PLANNED] == 20 and slow.most_in_flight > 1
            server.sim.top_up(KEY, 100)
            finished = paced(journal, client, clock, workers=8).submit(spec)
        assert finished.complete and finished.posts == 20
        once_each(server, posted)
    finally:
        server.stop()


class InterruptingClient(SlowClient):
    """On its ``nth`` POST, after the API acted, the process gets SIGINT (Ctrl-C): Python
    raises KeyboardInterrupt in the main thread, which waits for the workers."""

    def __init__(self, client: GeonodeClient, clock: ManualClock, at: int) -> None:
        super().__init__(client, clock)
        self._at = at
        self._sent = False

    def submit_extract(self, url: str, **options: Any) -> SubmittedJob:
        job = super().submit_extract(url, **options)
        with self._lock:  # once, by whichever worker's POST reached the count first
            send = self._posts >= self._at and not self._sent
            self._sent = self._sent or send
        if send:
            os.kill(os.getpid(), signal.SIGINT)  # to the process, as a terminal sends it
            self._clock.advance(0.2)  # the answer is still on its way
        return job


@pytest.fixture
def terminal_sigint() -> Iterator[None]:
    """SIGINT handled as in a terminal's process (Python's default): an xdist worker may have
    another handler installed, under which the signal never becomes KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("terminal_sigint")
def test_ctrl_c_in_the_main_thread_leaves_what_is_in_flight_in_doubt(
    server: SimulatorServer, journal: SqliteJournal, clock: ManualClock
):
    posted = urls("sigint", 30)
    spec = RunSpec.of(posted, RunMode.ASYNC)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=NO_RETRY) as client:
        with pytest.raises(KeyboardInterrupt):
            paced(journal, InterruptingClient(client, clock, 8), clock, workers=8).submit(spec)
        for thread in threading.enumerate():
            if thread.name.startswith("submit-"):
                thread.join(10)  # the workers finish what they had in flight, claim no more
        left = {e.state for e in journal.entries(spec.derived_name())}
        events: list[Event] = []
        report = paced(journal, client, clock, listener=events.append).submit(spec)
    # THEN nothing was left posting under a lease, and in all every URL was posted once
    assert S.POSTING not in left and S.PLANNED in left
    assert EventKind.WAITING not in {e.kind for e in events}
    assert report.complete
    once_each(server, posted)
