"""Following a job's chain of resubmissions in the ledger: the ledger's word on who carries a
job's work on (``successor``), and whole chains followed (moto, real boto3; fake clock).

A row closed resubmitted, or still open with its successor noted (its holder died before the
close), leads on; a row DONE any other way ends the chain; a row open with nothing noted, or
no row at all, leaves it going on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger import chains
from scrape_pipeline.ledger.chains import successor
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline_local.clock import ManualClock
from tests.support.template import create_ledger_table

HOLDER = "processor"
NEXT = {DETAIL_RESUBMITTED_AS: "next-job"}


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    with mock_aws():
        db = boto3.client("dynamodb")
        yield Ledger(create_ledger_table(db, "chains"), client=db, clock=ManualClock())


def _key(job_id: str) -> JobKey:
    return JobKey(JobKind.EXTRACT, job_id)


def _resubmitted(ledger: Ledger, job_id: str, following: str, *, closed: bool = True) -> None:
    """The processor's resubmission of ``job_id``: the successor noted, then (if ``closed``)
    the row closed so."""
    assert ledger.acquire(_key(job_id), HOLDER, 60, source="sqs").granted
    ledger.note_resubmission(_key(job_id), HOLDER, following)
    if closed:
        detail = {DETAIL_RESUBMITTED_AS: following}
        ledger.finish(_key(job_id), HOLDER, Outcome.RESUBMITTED, detail)


def _closed(ledger: Ledger, job_id: str, outcome: Outcome) -> None:
    assert ledger.acquire(_key(job_id), HOLDER, 60, source="sqs").granted
    ledger.finish(_key(job_id), HOLDER, outcome, {})


def test_chains_follow_each_resubmission_to_the_job_that_ended_it(ledger: Ledger):
    # GIVEN a chain a -> b -> c stored, and one d -> e whose holder died after noting e
    _resubmitted(ledger, "a", "b")
    _resubmitted(ledger, "b", "c")
    _closed(ledger, "c", Outcome.STORED)
    _resubmitted(ledger, "d", "e", closed=False)
    _closed(ledger, "e", Outcome.DEAD_LETTERED)
    # WHEN both are followed from their first job
    found = chains.follow(ledger, {"first": _key("a"), "second": _key("d")})
    # THEN each ended at its last job, with every job read on the way
    assert found["first"].ended and found["first"].job_ids == ("a", "b", "c")
    assert found["first"].final is not None and found["first"].final.outcome is Outcome.STORED
    assert found["second"].job_ids == ("d", "e") and found["second"].ended
    final = found["second"].final
    assert final is not None and final.outcome is Outcome.DEAD_LETTERED


def test_chains_go_on_while_a_successor_is_unknown_or_open(ledger: Ledger):
    # GIVEN a job resubmitted whose successor has no row yet, one whose successor runs, and
    # a job still running that nobody resubmitted
    _resubmitted(ledger, "a", "b")
    _resubmitted(ledger, "c", "d")
    ledger.record(_key("d"), source="webhook")
    ledger.record(_key("e"), source="webhook")
    # WHEN they are followed (a key with no row at all too)
    starts = {name: _key(name) for name in ("a", "c", "e", "nothing")}
    found = chains.follow(ledger, starts)
    # THEN none has ended, and none has a final job
    assert [found[name].ended for name in starts] == [False] * 4
    assert all(found[name].final is None for name in starts)
    assert found["a"].job_ids == ("a",) and found["c"].job_ids == ("c", "d")
    assert found["nothing"].rows == ()


def test_a_job_done_otherwise_ends_its_chain_whatever_its_detail_says(ledger: Ledger):
    # GIVEN a job whose holder noted a successor, then closed it stored after all (the same
    # holder's later attempt found it had settled)
    assert ledger.acquire(_key("a"), HOLDER, 60, source="sqs").granted
    ledger.note_resubmission(_key("a"), HOLDER, "b")
    ledger.finish(_key("a"), HOLDER, Outcome.STORED, {DETAIL_RESUBMITTED_AS: "b"})
    # WHEN it is followed
    [chain] = chains.follow(ledger, {"a": _key("a")}).values()
    # THEN it ended there
    assert chain.ended and chain.job_ids == ("a",)


def test_a_chain_longer_than_one_pass_reads_as_going_on(ledger: Ledger):
    # GIVEN a chain one job longer than a pass follows
    ids = [f"j{i}" for i in range(chains.MAX_CHAIN + 1)]
    for job_id, following in itertools.pairwise(ids):
        _resubmitted(ledger, job_id, following)
    _closed(ledger, ids[-1], Outcome.STORED)
    # WHEN it is followed from its first job
    [chain] = chains.follow(ledger, {"a": _key(ids[0])}).values()
    # THEN it goes on, MAX_CHAIN jobs read
    assert not chain.ended and len(chain.rows) == chains.MAX_CHAIN


def _row(state: JobState, outcome: Outcome | None, detail: dict[str, str]) -> LedgerRow:
    key = JobKey(JobKind.EXTRACT, "job")
    return LedgerRow(key, state, 0.0, 0.0, "webhook", outcome=outcome, detail=detail)


@pytest.mark.parametrize(
    ("state", "outcome", "detail", "expected"),
    [
        (JobState.DONE, Outcome.RESUBMITTED, NEXT, "next-job"),  # closed as resubmitted
        (JobState.PROCESSING, None, NEXT, "next-job"),  # noted; its holder died before the close
        (JobState.DONE, Outcome.STORED, NEXT, None),  # a later outcome of its own ends it
        (JobState.DONE, Outcome.RESUBMITTED, {}, None),  # nothing named
        (JobState.WATCHING, None, {}, None),  # runs on itself
    ],
)
def test_successor_is_the_noted_resubmission_unless_the_job_ended_otherwise(
    state: JobState, outcome: Outcome | None, detail: dict[str, str], expected: str | None
):
    assert successor(_row(state, outcome, detail)) == expected
