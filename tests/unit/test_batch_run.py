"""The processor's vocabulary and a batch's order, without AWS: the outcomes' metric names,
the suspects-last order, and the wiring package's builders resolved on first use."""

from __future__ import annotations

import json

import pytest

from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.processor.batch_run import suspects_last
from scrape_pipeline.processor.disposition import Disposition, MessageOutcome
from scrape_pipeline.processor.queue import JobMessage

# The metric names the dashboard and the alarms read (template.yaml): renaming one is a
# reviewed change of this table, never a side effect.
METRICS = {
    "stored": "JobsStored",
    "resubmitted": "JobsResubmitted",
    "dead_lettered": "JobsDeadLettered",
    "poisoned": "JobsPoisoned",
    "cancelled": "JobsCancelled",
    "not_settled": "JobsNotSettled",
    "not_found": "JobsNotSettled",
    "watching": "JobsWatching",
    "items_retrying": "JobsItemsRetrying",
    "parked": "JobsParkedSick",
    "in_progress": "JobsInProgress",
    "out_of_time": "ProcessorOutOfTime",
    "failed_attempt": "JobsFailedAttempt",
    "throttled": "GeonodeThrottled",
    "api_unavailable": "GeonodeUnavailable",
    "aws_unavailable": "ProcessorAWSUnavailable",
    "busy": "JobsBusy",
    "already_done": "JobsAlreadyDone",
    "lease_lost": "JobsLeaseLost",
    "in_doubt": "JobsInDoubt",
}


def test_every_message_outcome_carries_its_metric_name():
    # GIVEN every outcome a processed message can have
    # THEN each names its metric, the names the deployed dashboard and alarms read
    assert {outcome.value: outcome.metric for outcome in MessageOutcome} == METRICS


def test_an_outcome_is_logged_as_its_plain_value():
    # GIVEN an outcome as the processor's log line carries it
    # THEN it reads (and serialises) as the string it always was
    assert json.dumps({"outcome": MessageOutcome.DEAD_LETTERED}) == '{"outcome": "dead_lettered"}'
    assert f"{MessageOutcome.DEAD_LETTERED}" == "dead_lettered"


def _message(n: int) -> JobMessage:
    return JobMessage(JobKey(JobKind.EXTRACT, f"job-{n}"), "webhook")


def _row(n: int, strikes: int, state: JobState = JobState.ENQUEUED) -> LedgerRow:
    return LedgerRow(_message(n).key, state, 0.0, 0.0, "webhook", strikes=strikes, outcome=None)


@pytest.mark.parametrize(
    ("strikes", "done", "order", "suspects"),
    [
        # no strikes anywhere: arrival order, no suspect
        ([0, 0, 0], set(), [0, 1, 2], set()),
        # one suspect goes last, the others keep their order
        ([2, 0, 0], set(), [1, 2, 0], {0}),
        # several: fewest strikes first among them, ties in arrival order
        ([3, 1, 0, 1], set(), [2, 1, 3, 0], {0, 1, 3}),
        # a DONE row's old strikes make no suspect (its message is dropped at once)
        ([4, 0], {0}, [0, 1], set()),
    ],
)
def test_suspects_last_orders_by_strikes_of_rows_not_done(
    strikes: list[int], done: set[int], order: list[int], suspects: set[int]
):
    # GIVEN a batch of messages and their rows' strikes
    messages: list[JobMessage | None] = [_message(n) for n in range(len(strikes))]
    rows = {
        _message(n).key: _row(n, s, JobState.DONE if n in done else JobState.ENQUEUED)
        for n, s in enumerate(strikes)
    }
    # WHEN the batch is ordered
    # THEN suspects come last, and are named
    assert suspects_last(messages, rows) == (order, suspects)


def test_suspects_last_keeps_unreadable_messages_and_unknown_jobs_in_place():
    # GIVEN a batch with a message that is not a job, a job with no row, and a suspect
    messages = [_message(0), None, _message(2), _message(3)]
    rows = {_message(0).key: _row(0, 1), _message(3).key: _row(3, 0)}
    # WHEN it is ordered
    # THEN only the suspect moves (to the end)
    assert suspects_last(messages, rows) == ([1, 2, 3, 0], {0})


def test_a_closed_batch_counts_its_dead_lettered_items_in_jobs_dead_lettered():
    # GIVEN a batch closed stored with 3 items dead-lettered, and one that resubmitted 2
    closed = Disposition(MessageOutcome.STORED, items_dead_lettered=3)
    waiting = Disposition(MessageOutcome.ITEMS_RETRYING, items_retried=2)
    # THEN its items count beside its own outcome: lost units of work, and retries
    assert closed.item_metrics() == {"JobsDeadLettered": 3}
    assert waiting.item_metrics() == {"ItemsRetried": 2}
    assert Disposition(MessageOutcome.STORED).item_metrics() == {}
