"""``Source``: where a job became known, each member with its two traits, and how a message's
source is read (any short label is kept: it is for logs and metrics, never a reason to refuse).
"""

from __future__ import annotations

import json

import pytest

from scrape_pipeline.jobs import Source, source_proven, source_recovers
from scrape_pipeline.processor.queue import MAX_SOURCE_CHARS, read_message

# What PROVEN_SOURCES listed before the type, and the receiver's "not a late webhook" pair.
PROVEN = {"webhook", "submitted", "job_list", "delivery_log", "cli_replay", "rotation_replay"}
PROVEN |= {"watch"}
AWAIT_THEIR_WEBHOOK = {"webhook", "submitted"}


def test_every_source_states_both_traits() -> None:
    # A member is proven and recovers unless its trait says otherwise: these pin which.
    assert {s.value for s in Source if source_proven(s)} == PROVEN
    assert {s.value for s in Source if not source_recovers(s)} == AWAIT_THEIR_WEBHOOK
    assert Source.STUCK_ROWS.value == "stuck_rows"  # the reconciler's sweep name too


@pytest.mark.parametrize("label", ["reconciler", "reconciler:job_list", "", "WEBHOOK"])
def test_a_label_not_ours_proves_nothing_and_counts_as_a_recovery(label: str) -> None:
    assert Source.read(label) is None
    assert not source_proven(label)
    assert source_recovers(label)


def test_a_stored_label_reads_as_its_member() -> None:
    assert Source.read("rotation_replay") is Source.ROTATION
    assert source_proven("watch") and not source_proven("stuck_rows")
    assert not source_recovers("submitted") and source_recovers("job_list")


def _body(**fields: object) -> str:
    return json.dumps({"kind": "extract", "job_id": "job-1", **fields})


@pytest.mark.parametrize(
    ("sent", "read"),
    [
        ("watch", Source.WATCH),
        ("stuck_rows", Source.STUCK_ROWS),
        ("reconciler:job_list", "reconciler:job_list"),  # not ours: kept as it came
        ("x" * MAX_SOURCE_CHARS, "x" * MAX_SOURCE_CHARS),
        ("x" * (MAX_SOURCE_CHARS + 1), ""),  # too long to be anyone's: dropped, job kept
        (42, ""),
        (None, ""),
    ],
)
def test_a_message_source_is_read_tolerantly(sent: object, read: str) -> None:
    message = read_message(_body(source=sent))
    assert message.source == read
    assert isinstance(message.source, Source) == isinstance(read, Source)
    assert message.key.job_id == "job-1"


def test_a_message_without_a_source_is_still_a_job() -> None:
    assert read_message(_body()).source == ""


def test_a_member_goes_out_as_its_plain_text() -> None:
    message = read_message(_body(source="job_list"))
    assert json.loads(message.to_json())["source"] == "job_list"
    assert read_message(message.to_json()) == message
