"""What every run journal must do, as a class of tests a backend's module subclasses.

A subclass provides the ``make_journal`` fixture: a factory that opens the backend's store
(the same one on every call, so a second journal sees the first one's writes, as a rerun
after a crash does). Every test asserts the observed move against ``moves.MOVES``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from scrape_pipeline.runs import moves
from scrape_pipeline.runs.journal import Entry, Journal, MoveRefusedError, RunMismatchError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import Run, RunMode, RunSpec

S = EntryState
MakeJournal = Callable[..., Journal]
NOW = 1_800_000_000.0
URLS = tuple(f"https://example.com/journal/{i}" for i in range(5))


def _spec(mode: RunMode = RunMode.ASYNC, urls: tuple[str, ...] = URLS, **kw: Any) -> RunSpec:
    return RunSpec.of(urls, mode, {"formats": ["markdown"]}, **kw)


def _checked(move: moves.Move, before: EntryState, after: Entry) -> Entry:
    """``after`` (what ``move`` answered) is where the table lets ``move`` take ``before``."""
    allowed = before in move.sources and after.state == (move.target or before)
    assert allowed, (move.verb, before, after.state)
    return after


class JournalContract:
    """The contract; ``make_journal(lease_s=...)`` comes from the subclass."""

    # A journal that announces a batch or crawl in the write of its job id (DynamoDB's):
    # its entry is born announced, and ``announce`` finds nothing left to do.
    born_announced = False

    @pytest.fixture
    def journal(self, make_journal: MakeJournal) -> Journal:
        return make_journal()

    def _planned(self, journal: Journal, mode: RunMode = RunMode.ASYNC) -> list[Entry]:
        run, _ = journal.plan(_spec(mode), "run-1", NOW)
        return journal.entries(run.name)

    # -- planning --------------------------------------------------------------------------

    def test_journal_plan_makes_one_planned_entry_per_url(self, journal: Journal):
        run, created = journal.plan(_spec(), "run-1", NOW)
        assert created and run.entries == len(URLS) and run.mode is RunMode.ASYNC
        entries = journal.entries("run-1")
        assert [e.urls for e in entries] == [(u,) for u in URLS]
        assert {e.state for e in entries} == {EntryState.PLANNED}
        assert journal.run("run-1") == run

    def test_journal_plan_again_adds_nothing(self, journal: Journal):
        # GIVEN a planned run with one entry claimed
        journal.plan(_spec(), "run-1", NOW)
        first = journal.entries("run-1")[0]
        journal.claim(first, "a", NOW)
        # WHEN the same plan is made again, by another journal on the same store
        run, created = journal.plan(_spec(), "run-1", NOW + 5)
        # THEN nothing was added or reset
        assert not created and run.created_at == NOW
        entries = journal.entries("run-1")
        assert len(entries) == len(URLS) and entries[0].state is EntryState.POSTING

    def test_journal_plan_same_name_other_urls_is_refused(self, journal: Journal):
        journal.plan(_spec(), "run-1", NOW)
        with pytest.raises(RunMismatchError, match="run-1"):
            journal.plan(_spec(urls=URLS[:2]), "run-1", NOW)
        with pytest.raises(RunMismatchError):
            journal.plan(_spec(RunMode.CRAWL), "run-1", NOW)

    def test_journal_batch_plan_is_one_entry_per_chunk(self, journal: Journal):
        urls = tuple(f"https://example.com/chunk/{i}" for i in range(2500))
        journal.plan(_spec(RunMode.BATCH, urls), "big", NOW)
        entries = journal.entries("big")
        assert [len(e.urls) for e in entries] == [1000, 1000, 500]
        assert tuple(u for e in entries for u in e.urls) == urls

    def test_journal_entries_filtered_by_state(self, journal: Journal):
        first, *_ = self._planned(journal)
        journal.claim(first, "a", NOW)
        assert [e.index for e in journal.entries("run-1", [EntryState.POSTING])] == [0]
        assert len(journal.entries("run-1", [EntryState.PLANNED])) == len(URLS) - 1
        assert journal.entries("nope") == []

    # -- claims ----------------------------------------------------------------------------

    def test_journal_claim_once_only(self, journal: Journal):
        first, *_ = self._planned(journal)
        claimed = _checked(moves.CLAIM, S.PLANNED, journal.claim(first, "a", NOW))
        assert claimed.owner == "a" and claimed.lease_until == NOW + journal.lease_s
        with pytest.raises(MoveRefusedError) as refused:
            journal.claim(first, "b", NOW)
        assert refused.value.entry is not None and refused.value.entry.owner == "a"

    def test_journal_concurrent_claims_one_wins(self, make_journal: MakeJournal):
        # GIVEN eight submitters, each with its own journal on the same store
        journals = [make_journal() for _ in range(8)]
        first = self._planned(journals[0])[0]
        wins: list[str] = []
        barrier = threading.Barrier(len(journals))

        def race(owner: str, journal: Journal) -> None:
            barrier.wait()
            try:
                journal.claim(first, owner, NOW)
            except MoveRefusedError:
                return
            wins.append(owner)

        threads = [threading.Thread(target=race, args=(f"s{i}", j)) for i, j in enumerate(journals)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # THEN exactly one holds it
        assert len(wins) == 1
        assert journals[0].entries("run-1")[0].owner == wins[0]

    def test_journal_only_the_holder_records_the_answer(self, journal: Journal):
        first, second, third, fourth, _ = self._planned(journal)
        for entry in (first, second, third, fourth):
            journal.claim(entry, "a", NOW)
        for verb in (
            lambda e, o: journal.submit(e, o, "job-x", NOW),
            lambda e, o: journal.reject(e, o, "bad", NOW),
            lambda e, o: journal.release(e, o, "429", NOW),
            lambda e, o: journal.doubt(e, o, "timeout", NOW),
        ):
            with pytest.raises(MoveRefusedError):
                verb(first, "b")
        submitted = _checked(moves.SUBMIT, S.POSTING, journal.submit(first, "a", "job-1", NOW + 1))
        assert submitted.state is EntryState.SUBMITTED and submitted.job_id == "job-1"
        rejected = _checked(moves.REJECT, S.POSTING, journal.reject(second, "a", "invalid", NOW))
        assert rejected.state is EntryState.REJECTED and rejected.reason == "invalid"
        released = _checked(moves.RELEASE, S.POSTING, journal.release(third, "a", "429", NOW))
        assert released.state is EntryState.PLANNED and released.owner is None
        doubted = _checked(moves.DOUBT, S.POSTING, journal.doubt(fourth, "a", "timeout", NOW + 2))
        assert doubted.state is EntryState.IN_DOUBT and doubted.doubted_at == NOW + 2
        assert doubted.posted_at == NOW

    def test_journal_final_states_are_final(self, journal: Journal):
        first, *_ = self._planned(journal)
        journal.claim(first, "a", NOW)
        journal.submit(first, "a", "job-1", NOW)
        for verb in (
            lambda: journal.claim(first, "a", NOW),
            lambda: journal.doubt(first, "a", "late", NOW),
            lambda: journal.expire(first, NOW + 10_000),
            lambda: journal.adopt(first, "job-2", NOW),
        ):
            with pytest.raises(MoveRefusedError):
                verb()
        assert journal.entries("run-1")[0].job_id == "job-1"

    # -- leases and doubt ------------------------------------------------------------------

    def test_journal_posting_expires_into_doubt_only_after_the_lease(
        self, make_journal: MakeJournal
    ):
        journal = make_journal(lease_s=60.0)
        first, *_ = self._planned(journal)
        claimed = journal.claim(first, "crashed", NOW)
        with pytest.raises(MoveRefusedError):
            journal.expire(claimed, NOW + 59)
        expired = _checked(moves.EXPIRE, S.POSTING, journal.expire(claimed, NOW + 60))
        assert expired.state is EntryState.IN_DOUBT and expired.doubted_at == NOW + 60
        # never back to planned: the crashed submitter's late answer cannot land either
        with pytest.raises(MoveRefusedError):
            journal.submit(expired, "crashed", "job-1", NOW + 61)

    def test_journal_abandon_moves_only_the_named_holder_s_entry_before_its_lease(
        self, journal: Journal
    ):
        first, second, *_ = self._planned(journal)
        claimed = journal.claim(first, "dead-holder", NOW)
        with pytest.raises(MoveRefusedError):
            journal.abandon(claimed, "another", NOW + 1)  # it changed hands: refused
        gone = _checked(moves.ABANDON, S.POSTING, journal.abandon(claimed, "dead-holder", NOW + 1))
        assert gone.state is S.IN_DOUBT and gone.doubted_at == NOW + 1
        with pytest.raises(MoveRefusedError):
            journal.abandon(second, "dead-holder", NOW + 1)  # planned, not posting

    def test_journal_in_doubt_is_adopted_or_reclaimed_once(self, journal: Journal):
        first, second, *_ = self._planned(journal)
        run = journal.run("run-1")
        assert run is not None
        for entry in (first, second):
            journal.claim(entry, "a", NOW)
            journal.doubt(entry, "a", "timeout", NOW)
        adopted = _checked(moves.ADOPT, S.IN_DOUBT, journal.adopt(first, "job-found", NOW + 30))
        assert adopted.state is EntryState.SUBMITTED and adopted.job_id == "job-found"
        doubted = journal.entries("run-1", [EntryState.IN_DOUBT])[0]
        again = _checked(moves.RECLAIM, S.IN_DOUBT, journal.reclaim(run, doubted, "b", NOW + 30))
        assert again.state is EntryState.POSTING and again.owner == "b"
        assert again.posted_at == NOW + 30
        with pytest.raises(MoveRefusedError):
            journal.reclaim(run, doubted, "c", NOW + 30)

    def test_journal_batch_in_doubt_is_never_reclaimed(self, journal: Journal):
        urls = tuple(f"https://example.com/b/{i}" for i in range(3))
        run, _ = journal.plan(_spec(RunMode.BATCH, urls), "batch-1", NOW)
        [entry] = journal.entries("batch-1")
        journal.claim(entry, "a", NOW)
        journal.doubt(entry, "a", "504", NOW)
        with pytest.raises(MoveRefusedError):
            journal.reclaim(run, entry, "a", NOW)
        assert journal.entries("batch-1")[0].state is EntryState.IN_DOUBT

    def test_journal_batch_in_doubt_is_reposted_only_once_and_never_an_extract(
        self, journal: Journal
    ):
        urls = tuple(f"https://example.com/b/{i}" for i in range(3))
        run, _ = journal.plan(_spec(RunMode.BATCH, urls), "batch-1", NOW)
        [entry] = journal.entries("batch-1")
        with pytest.raises(MoveRefusedError):
            journal.repost(run, entry, NOW)  # planned, not in doubt
        journal.claim(entry, "a", NOW)
        journal.doubt(entry, "a", "504", NOW)
        back = _checked(moves.REPOST, S.IN_DOUBT, journal.repost(run, entry, NOW + 5))
        assert back.state is EntryState.PLANNED and back.owner is None and back.job_id is None
        with pytest.raises(MoveRefusedError):
            journal.repost(run, entry, NOW + 6)  # the second operator finds it planned
        # an extract in doubt is looked up (reclaim), never re-posted blind
        first, *_ = self._planned(journal)
        extracts = journal.run("run-1")
        assert extracts is not None
        journal.claim(first, "a", NOW)
        journal.doubt(first, "a", "timeout", NOW)
        with pytest.raises(MoveRefusedError):
            journal.repost(extracts, first, NOW)
        assert journal.entries("run-1")[0].state is EntryState.IN_DOUBT

    def test_journal_run_guards_of_the_move_table_refuse_other_modes(self, journal: Journal):
        # GIVEN an entry in doubt in a run of each mode, and each verb whose move has a run guard
        verbs: dict[moves.Verb, Callable[[Journal, Run, Entry], Entry]] = {
            moves.Verb.RECLAIM: lambda j, run, e: j.reclaim(run, e, "b", NOW + 1),
            moves.Verb.REPOST: lambda j, run, e: j.repost(run, e, NOW + 1),
        }
        guarded = [m for m in moves.MOVES if m.guard in moves.RUN_GUARDS]
        assert {m.verb for m in guarded} == set(verbs)  # a new run guard needs its case here
        for move in guarded:
            for mode in RunMode:
                name = f"{move.verb}-{mode}"
                urls = tuple(f"https://example.com/{name}/{i}" for i in range(2))
                run, _ = journal.plan(_spec(mode, urls), name, NOW)
                entry = journal.entries(name)[0]
                journal.claim(entry, "a", NOW)
                doubted = journal.doubt(entry, "a", "504", NOW)
                # WHEN the verb is tried
                if move.admits(mode):
                    # THEN it moves where the table says for the modes its guard admits
                    _checked(move, S.IN_DOUBT, verbs[move.verb](journal, run, doubted))
                    continue
                # THEN for the others it is refused and the entry stays in doubt
                with pytest.raises(MoveRefusedError):
                    verbs[move.verb](journal, run, doubted)
                assert journal.entries(name)[0].state is S.IN_DOUBT
        admitted = {m.verb: {mode for mode in RunMode if m.admits(mode)} for m in guarded}
        assert admitted == {
            moves.Verb.RECLAIM: {RunMode.ASYNC},
            moves.Verb.REPOST: {RunMode.BATCH, RunMode.CRAWL},
        }

    def test_journal_announce_once(self, journal: Journal):
        first, *_ = self._planned(journal, RunMode.CRAWL)
        with pytest.raises(MoveRefusedError):
            journal.announce(first, NOW)  # not submitted yet
        journal.claim(first, "a", NOW)
        submitted = journal.submit(first, "a", "crawl-1", NOW)
        if self.born_announced:
            assert submitted.announced and submitted.state is EntryState.SUBMITTED
        else:
            announced = _checked(moves.ANNOUNCE, S.SUBMITTED, journal.announce(submitted, NOW))
            assert announced.announced and announced.state is EntryState.SUBMITTED
        with pytest.raises(MoveRefusedError):
            journal.announce(submitted, NOW)

    def test_journal_survives_reopening(self, make_journal: MakeJournal):
        journal = make_journal()
        first, *_ = self._planned(journal)
        journal.claim(first, "a", NOW)
        journal.submit(first, "a", "job-1", NOW)
        reopened = make_journal()
        assert reopened.entries("run-1")[0].job_id == "job-1"
        assert reopened.run("run-1") == journal.run("run-1")
