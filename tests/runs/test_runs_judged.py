"""Issue 19's "done when", judged by the simulator's record of POSTs per URL, never the journal.

A kill at every step of an entry's journal, in each mode it applies to, then reruns (and the
operator's ``runs resolve`` where a batch or crawl needs one): every URL created exactly once,
or, while a batch or crawl's answer may be lost, reported in doubt and never posted twice. A
kill is a BaseException raised by a wrapping client, journal or announcer, before the call it
wraps or once that call returned. The clock is the manual one: nothing sleeps for real.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.runs.dynamodb import DynamoJournal
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.evidence import CandidateSource
from scrape_pipeline.runs.journal import Journal, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline.runs.report import Verdict
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.integration.test_client_simulator import KEY, start
from tests.runs.conftest import journal_of

S = EntryState
A, B, C = RunMode.ASYNC, RunMode.BATCH, RunMode.CRAWL
POST_METHOD = {A: "submit_extract", B: "create_batch", C: "create_crawl"}
POST_ROUTE = {A: "POST /v1/extract", B: "POST /v1/batch", C: "POST /v1/crawl"}


class Kill(BaseException):
    """The process dies here: nothing in the submitter catches a BaseException."""


# -- the kill points ------------------------------------------------------------------------


@dataclass(frozen=True)
class At:
    """A kill at the ``nth`` call of ``method`` of the client, the journal or the announcer,
    before the call (``after=False``) or once it returned. ``POST`` is the mode's create."""

    target: Literal["client", "journal", "announce"]
    method: str
    nth: int = 2
    after: bool = False


class Killing:
    """``inner`` with one of its methods killed at its ``nth`` call."""

    def __init__(self, inner: Any, method: str, nth: int, after: bool) -> None:
        self._inner, self._method, self._nth, self._after = inner, method, nth, after
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name != self._method:
            return found
        return self._killed(found)

    def _killed(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def killed(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            hit = self._calls == self._nth
            if hit and not self._after:
                raise Kill
            result = call(*args, **kwargs)
            if hit:
                raise Kill
            return result

        return killed

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # the announcer is a callable
        return self._killed(self._inner)(*args, **kwargs)


@dataclass(frozen=True)
class Case:
    """The kills of successive submits of one run (each one dies), on the modes it fits."""

    name: str
    kills: tuple[At, ...]
    modes: tuple[RunMode, ...] = (A, B, C)
    first_answer: Literal["", "lost", "429"] = ""  # what the API answers the first POST


LOST: Final = "lost"  # the first POST's answer is lost (a 504) after the API acted
THROTTLED: Final = "429"  # the first POST is refused with a 429: the API did not act
CASES = (
    Case("in plan", (At("journal", "plan", 1),)),
    Case("before claim", (At("journal", "claim"),)),
    Case("after claim, before send", (At("journal", "claim", after=True),)),
    Case("in the client, before send", (At("client", "POST"),)),
    Case("after the API created it, answer unread", (At("client", "POST", after=True),)),
    Case("answer read, before the journal write", (At("journal", "submit"),)),
    Case("after submit, before announce", (At("journal", "submit", after=True),)),
    Case("in announce", (At("announce", "__call__"),), (B, C)),
    Case("after announce, before its write", (At("announce", "__call__", after=True),), (B, C)),
    Case("answer lost, before the doubt write", (At("journal", "doubt", 1),), (A, B, C), LOST),
    Case("answer lost, after the doubt write", (At("journal", "doubt", 1, True),), (A, B, C), LOST),
    Case("in the lookup of an extract in doubt", (At("client", "iter_jobs", 1),), (A,), LOST),
    Case("lookup found it, before adopt", (At("journal", "adopt", 1),), (A,), LOST),
    Case("lookup found it, after adopt", (At("journal", "adopt", 1, True),), (A,), LOST),
    Case("429, before the release write", (At("journal", "release", 1),), (A, B, C), THROTTLED),
    Case(
        "429, after the release write", (At("journal", "release", 1, True),), (A, B, C), THROTTLED
    ),
    Case("in expire", (At("client", "POST", 1), At("journal", "expire", 1))),
    Case("after expire", (At("client", "POST", 1), At("journal", "expire", 1, True))),
    Case("before reclaim", (At("client", "POST", 1), At("journal", "reclaim", 1)), (A,)),
    Case("after reclaim", (At("client", "POST", 1), At("journal", "reclaim", 1, True)), (A,)),
    # The second submit posts entries 1 and 2, then reclaims entry 0: its third POST.
    Case("re-post after reclaim", (At("client", "POST", 1), At("client", "POST", 3, True)), (A,)),
    Case("again after a rerun's claim", (At("client", "POST"), At("journal", "claim", 1, True))),
)


# The kills that leave an entry to a dead submitter's lease, where the journals' conditional
# writes decide most: run on the stack's journal too (moto is slow; the rest are the file's).
ON_THE_STACK = {
    "after claim, before send",
    "after the API created it, answer unread",
    "answer lost, before the doubt write",
    "after reclaim",
}


def _params() -> Iterator[Any]:
    for case in CASES:
        for mode in case.modes:
            yield pytest.param(case, mode, "sqlite", id=f"{mode}: {case.name}")
            if case.name in ON_THE_STACK:
                yield pytest.param(case, mode, "dynamodb", id=f"{mode}: {case.name} (stack)")


# -- the parts -------------------------------------------------------------------------------


def urls(tag: str, n: int) -> list[str]:
    return [f"https://example.com/judged/{tag}/{i}" for i in range(n)]


def spec_of(mode: RunMode, tag: str) -> RunSpec:
    """Three entries in each mode: three extracts, three batches of two, three crawls."""
    if mode is B:
        return RunSpec.of(urls(tag, 6), B, batch_size=2)
    options = {"max_pages": 1} if mode is C else {}
    return RunSpec.of(urls(tag, 3), mode, options)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    opened = SqliteJournal(tmp_path / "journal.sqlite3")
    yield opened
    opened.close()


@pytest.fixture
def any_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    """Each journal a submitter may keep: the file, and the stack's (moto on 127.0.0.1)."""
    with journal_of(request.param, request, tmp_path) as opened:
        yield opened


@pytest.fixture
def api(server: SimulatorServer, clock: ManualClock) -> Iterator[GeonodeClient]:
    """A client that leaves every retry to the submitter (its verdicts are the ones judged)."""
    retry = RetryPolicy(max_attempts=1)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=retry) as client:
        yield client


class Announced:
    """The ledger's side of announcements: (kind, job id) as the submitter told them."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    def __call__(self, kind: str, job_id: str) -> None:
        self.told.append((kind, job_id))


class Webhooks:
    """Evidence as webhooks bring it: every batch or crawl the simulator created, by id."""

    def __init__(self, server: SimulatorServer) -> None:
        self.server = server

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        record = {JobKind.BATCH: "batch_item", JobKind.CRAWL: "crawl_page"}[kind]
        return dict.fromkeys(j["job_id"] for j in self.server.sim.truth_jobs(record))


def submitter(
    journal: Any,
    client: Any,
    clock: ManualClock,
    announce: Callable[[str, str], None] | None = None,
    evidence: CandidateSource | None = None,
) -> Submitter:
    return Submitter(
        journal,
        client,
        clock=clock,
        pace=Pace(clock),
        rng=random.Random(3),
        announce=announce,
        evidence=evidence,
    )


def killed(
    at: At, mode: RunMode, journal: Journal, client: GeonodeClient, told: Announced | None
) -> tuple[Any, Any, Any]:
    """The journal, client and announcer of a submit that dies at ``at``."""
    method = POST_METHOD[mode] if at.method == "POST" else at.method
    parts: dict[str, Any] = {"journal": journal, "client": client, "announce": told}
    parts[at.target] = Killing(parts[at.target], method, at.nth, at.after)
    return parts["journal"], parts["client"], parts["announce"]


def foreign(client: GeonodeClient, mode: RunMode, tag: str) -> None:
    """A batch or crawl of other URLs, someone else's: evidence names it too, never adopted."""
    if mode is B:
        client.create_batch(urls(f"foreign-{tag}", 2))
    elif mode is C:
        client.create_crawl(urls(f"foreign-{tag}", 1)[0], max_pages=1)


def posts(server: SimulatorServer, listed: Sequence[str]) -> list[int]:
    """How many times the simulator was asked to create each URL (batch, crawl or extract)."""
    submissions = server.sim.submissions()
    return [submissions.get(url, 0) for url in listed]


def resolve(
    journal: Journal, client: GeonodeClient, clock: ManualClock, name: str, **kw: Any
) -> None:
    """``runs resolve NAME --repost-in-doubt``: settle from the evidence, re-plan what is left."""
    run = journal.run(name)
    assert run is not None
    entries = submitter(journal, client, clock, **kw).settle(run, post_unfound=True)
    for entry in entries:
        if entry.state is S.IN_DOUBT and run.mode is not A:
            journal.repost(run, entry, clock.time())


# -- a kill at every step --------------------------------------------------------------------


@pytest.mark.parametrize(("case", "mode", "any_journal"), list(_params()), indirect=["any_journal"])
def test_judged_rerun_after_a_kill_at_every_step_creates_each_url_once(
    server: SimulatorServer,
    api: GeonodeClient,
    any_journal: Journal,
    clock: ManualClock,
    case: Case,
    mode: RunMode,
):
    # GIVEN a run of three entries, whose submits die at the case's kill points in turn
    journal = any_journal
    spec = spec_of(mode, f"{mode}-{CASES.index(case)}")
    listed = list(spec.urls)
    told = Announced()
    # The stack's journal announces a batch or crawl in the write of its id: no announcer.
    tell = None if isinstance(journal, DynamoJournal) else told
    foreign(api, mode, f"{mode}-{CASES.index(case)}")
    if case.first_answer == LOST:
        server.sim.faults.lose_answers(POST_ROUTE[mode], [504])
    elif case.first_answer == THROTTLED:
        server.sim.faults.burst(count=1, status=429, route=POST_ROUTE[mode])
    for at in case.kills:
        with pytest.raises(Kill):
            dying, client, announce = killed(at, mode, journal, api, tell)
            submitter(dying, client, clock, announce).submit(spec)
        assert max(posts(server, listed)) <= 1
    # WHEN the same run is submitted again by a healthy process
    rerun = submitter(journal, api, clock, tell).submit(spec)
    # THEN no URL was ever posted twice, and nothing is left planned or posting
    assert max(posts(server, listed)) <= 1
    assert set(rerun.counts) <= {S.SUBMITTED, S.IN_DOUBT}
    if mode is A:
        # an extract is settled by the job list: every URL created once, the run complete
        assert rerun.complete and posts(server, listed) == [1] * len(listed)
        return
    # a batch or crawl whose answer may be lost is reported in doubt, nothing posted for it;
    # a rerun changes nothing
    doubted = [url for e in rerun.where(S.IN_DOUBT) for url in e.urls]
    again = submitter(journal, api, clock, tell).submit(spec)
    assert again.posts == 0 and again.counts == rerun.counts
    # WHEN the operator resolves it: evidence first (its webhook), then --repost-in-doubt
    resolve(journal, api, clock, rerun.run.name, evidence=Webhooks(server), announce=tell)
    final = submitter(journal, api, clock, tell).submit(spec)
    # THEN every URL was created exactly once, in doubt or not, and each job announced
    assert final.complete, (doubted, final.counts)
    assert posts(server, listed) == [1] * len(listed)
    if tell is not None:
        assert {j for _, j in told.told} == {e.job_id for e in final.entries}


# -- a lost answer in each mode --------------------------------------------------------------


@pytest.mark.parametrize("mode", [A, B, C])
def test_judged_lost_answer_adopted_or_in_doubt_and_reposted_only_when_ordered(
    server: SimulatorServer,
    api: GeonodeClient,
    journal: SqliteJournal,
    clock: ManualClock,
    mode: RunMode,
):
    # GIVEN the API creates the first entry's job, then its answer is lost (a gateway's 504)
    spec = spec_of(mode, f"lost-{mode}")
    listed = list(spec.urls)
    first = list(spec.chunks()[0])
    server.sim.faults.lose_answers(POST_ROUTE[mode], [504])
    report = submitter(journal, api, clock).submit(spec)
    if mode is A:
        # THEN an extract is found in the job list and adopted: each URL created once
        assert report.complete and posts(server, listed) == [1] * len(listed)
        return
    # THEN a batch or crawl is in doubt, named, and never re-posted by reruns
    [doubted] = report.where(S.IN_DOUBT)
    assert list(doubted.urls) == first and "504" in (doubted.reason or "")
    for _ in range(2):
        assert submitter(journal, api, clock).submit(spec).posts == 0
    assert posts(server, listed) == [1] * len(listed)
    # WHEN the operator orders --repost-in-doubt (no evidence): it is posted again, as ordered
    resolve(journal, api, clock, report.run.name)
    final = submitter(journal, api, clock).submit(spec)
    assert final.complete and final.posts == 1
    assert posts(server, listed) == [2 if url in first else 1 for url in listed]


@pytest.mark.parametrize("mode", [B, C])
def test_judged_lost_answer_of_a_batch_or_crawl_is_adopted_from_its_webhook(
    server: SimulatorServer,
    api: GeonodeClient,
    journal: SqliteJournal,
    clock: ManualClock,
    mode: RunMode,
):
    spec = spec_of(mode, f"webhook-{mode}")
    server.sim.faults.lose_answers(POST_ROUTE[mode], [504])
    report = submitter(journal, api, clock).submit(spec)
    assert len(report.where(S.IN_DOUBT)) == 1
    # WHEN a later submit knows the webhooks' jobs
    again = submitter(journal, api, clock, evidence=Webhooks(server)).submit(spec)
    # THEN the entry was adopted with the job the API created, nothing posted again
    assert again.complete and again.posts == 0
    assert posts(server, list(spec.urls)) == [1] * len(spec.urls)
    record = "batch_item" if mode is B else "crawl_page"
    created = {j["job_id"] for j in server.sim.truth_jobs(record)}
    assert {e.job_id for e in again.entries} == created


# -- 402 mid-run -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [A, B, C])
def test_judged_402_mid_run_then_a_rerun_after_top_up_pays_nothing_twice(
    clock: ManualClock, journal: SqliteJournal, mode: RunMode
):
    # GIVEN a balance that covers the first two entries only (one token a URL, a crawl one)
    tokens = 4 if mode is B else 2
    server = start(clock, balance_tokens=tokens)
    try:
        with GeonodeClient(KEY, base_url=server.base_url, clock=clock) as client:
            spec = spec_of(mode, f"balance-{mode}")
            stopped = submitter(journal, client, clock).submit(spec)
            assert stopped.stopped is not None
            assert stopped.stopped.verdict is Verdict.OUT_OF_BALANCE
            assert stopped.counts == {S.SUBMITTED: 2, S.PLANNED: 1}
            server.sim.top_up(KEY, 10)
            finished = submitter(journal, client, clock).submit(spec)
            # THEN after the top-up the run finishes, and no URL was paid for twice
            assert finished.complete and finished.posts == 1
            assert posts(server, list(spec.urls)) == [1] * len(spec.urls)
    finally:
        server.stop()


# -- 5,000 URLs in batches -------------------------------------------------------------------


def test_judged_5000_url_batch_run_is_5_posts_of_1000(
    server: SimulatorServer, api: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    listed = urls("five-thousand", 5000)
    report = submitter(journal, api, clock).submit(RunSpec.of(listed, B))
    # THEN five POSTs of a thousand, every URL once, the batches' items cover the URLs
    items = server.sim.truth_jobs("batch_item")
    by_batch: dict[str, set[str]] = {}
    for item in items:
        by_batch.setdefault(item["job_id"], set()).add(item["url"])
    assert report.complete and report.posts == 5
    assert sorted(len(u) for u in by_batch.values()) == [1000] * 5
    assert set().union(*by_batch.values()) == set(listed)
    assert {e.job_id for e in report.entries} == set(by_batch)
    assert posts(server, listed) == [1] * 5000


def test_judged_a_repost_order_for_an_extract_is_refused_by_the_table(
    server: SimulatorServer, api: GeonodeClient, journal: SqliteJournal, clock: ManualClock
):
    # An extract in doubt is looked up, never re-planned blind: the move table's run guard.
    spec = spec_of(A, "guard")
    dying, client, _ = killed(At("client", "POST", 1), A, journal, api, Announced())
    with pytest.raises(Kill):
        submitter(dying, client, clock).submit(spec)
    [posting] = journal.entries(spec.derived_name(), [S.POSTING])
    run = journal.run(spec.derived_name())
    assert run is not None
    doubted = journal.expire(posting, clock.time() + journal.lease_s)
    with pytest.raises(MoveRefusedError):
        journal.repost(run, doubted, clock.time())
    assert posts(server, list(spec.urls)) == [0, 0, 0]
