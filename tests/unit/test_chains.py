"""The ledger's word on who carries a job's work on (``scrape_pipeline.chains.successor``)."""

from __future__ import annotations

import pytest

from scrape_pipeline.chains import successor
from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind, JobState, Outcome
from scrape_pipeline.ledger import LedgerRow

NEXT = {DETAIL_RESUBMITTED_AS: "next-job"}


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
