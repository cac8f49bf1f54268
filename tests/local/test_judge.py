"""The demo's judge: live keys, retired dead letters, poison jobs, read from a versioned bucket."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline_local.judge import (
    REASON_POISON,
    SWITCH_SECONDS,
    Listing,
    Unit,
    Verdict,
    judge,
    read_listing,
    refusals,
)

BUCKET = "results"
POISON_JOB = "poison-1"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield client


def row(status: str = "completed", kind: str = "extract") -> dict[str, Any]:
    return {"kind": kind, "status": status, "retryable": False, "url": "https://x.example/"}


def put(s3: Any, key: str, body: str = "{}") -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode())


def dead_letter(s3: Any, key: str, reason: str) -> None:
    put(s3, key, f'{{"reason": "{reason}"}}')


def reason_in(s3: Any) -> Callable[[str], str | None]:
    def reason_of(key: str) -> str | None:
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
        return str(json.loads(body).get("reason"))

    return reason_of


def run_judge(s3: Any, units: list[tuple[Unit, Mapping[str, Any]]]) -> Verdict:
    return judge(
        units,
        read_listing(s3, BUCKET),
        is_poison=lambda job_id: job_id == POISON_JOB,
        resubmitted=lambda job: False,
        reason_of=reason_in(s3),
    )


def test_judge_a_retired_dead_letter_next_to_a_stored_result_is_not_twice(s3: Any):
    # GIVEN a job closed as "never settled", then stored, its record retired (delete marker)
    unit = Unit("extract", "late-1", None)
    dead_letter(s3, unit.dead_letter_key, "never settled")
    put(s3, unit.result_key)
    s3.delete_object(Bucket=BUCKET, Key=unit.dead_letter_key)
    # WHEN judged
    verdict = run_judge(s3, [(unit, row())])
    # THEN it counts once, as stored, and nothing is wrong
    assert (verdict.stored, verdict.dead_lettered) == (1, 0)
    assert (verdict.processed_twice, verdict.wrongly_dead_lettered, verdict.lost) == (0, 0, 0)


def test_judge_a_live_dead_letter_next_to_a_stored_result_is_twice(s3: Any):
    # GIVEN a stored job whose dead letter was never retired
    unit = Unit("extract", "late-2", None)
    dead_letter(s3, unit.dead_letter_key, "never settled")
    put(s3, unit.result_key)
    # WHEN judged
    verdict = run_judge(s3, [(unit, row())])
    # THEN it is processed twice (and the completed job's live record is a wrong one)
    assert verdict.processed_twice == 1
    assert verdict.wrongly_dead_lettered == 1


def test_judge_a_second_version_of_a_result_is_twice(s3: Any):
    # GIVEN a result written twice
    unit = Unit("batch", "b-1", 3)
    put(s3, unit.result_key)
    put(s3, unit.result_key)
    # WHEN judged
    verdict = run_judge(s3, [(unit, row(kind="batch_item"))])
    # THEN the key's second version counts
    assert verdict.processed_twice == 1
    assert verdict.twice_examples == [unit.result_key]


def test_judge_a_dead_letter_retired_then_written_anew_is_not_twice(s3: Any):
    # GIVEN a job closed as "unknown job", reopened, then failed for good: its first record
    # retired (delete marker) and the new one written at the same key
    unit = Unit("extract", "reopened-1", None)
    dead_letter(s3, unit.dead_letter_key, "unknown job")
    s3.delete_object(Bucket=BUCKET, Key=unit.dead_letter_key)
    dead_letter(s3, unit.dead_letter_key, "not retryable")
    # WHEN judged
    verdict = run_judge(s3, [(unit, row(status="failed"))])
    # THEN it counts once, dead-lettered: the take-back makes the second version no repeat
    assert (verdict.dead_lettered, verdict.processed_twice, verdict.lost) == (1, 0, 0)


def test_judge_a_dead_letter_written_twice_without_a_take_back_is_twice(s3: Any):
    # GIVEN a record written twice, a retired key elsewhere in the bucket notwithstanding
    unit = Unit("extract", "twice-1", None)
    dead_letter(s3, unit.dead_letter_key, "not retryable")
    dead_letter(s3, unit.dead_letter_key, "not retryable")
    put(s3, "dead-letters/extract/other.json")
    s3.delete_object(Bucket=BUCKET, Key="dead-letters/extract/other.json")
    # WHEN judged
    verdict = run_judge(s3, [(unit, row(status="failed"))])
    # THEN it is processed twice
    assert verdict.twice_examples == [unit.dead_letter_key]


def test_judge_a_live_dead_letter_for_a_completed_job_is_wrongly_dead_lettered(s3: Any):
    # GIVEN a completed, healthy job dead-lettered and not stored
    unit = Unit("extract", "ok-1", None)
    dead_letter(s3, unit.dead_letter_key, REASON_POISON)
    # WHEN judged
    verdict = run_judge(s3, [(unit, row())])
    # THEN it is wrongly dead-lettered, not lost, not poisoned
    assert verdict.wrongly_dead_lettered == 1
    assert verdict.wrongly_examples == [unit.dead_letter_key]
    assert (verdict.dead_lettered, verdict.poisoned, verdict.lost) == (1, 0, 0)


def test_judge_a_failed_job_dead_lettered_is_right(s3: Any):
    # GIVEN a job that failed for good, dead-lettered
    unit = Unit("extract", "failed-1", None)
    dead_letter(s3, unit.dead_letter_key, "not retryable")
    # WHEN judged
    verdict = run_judge(s3, [(unit, row(status="failed"))])
    # THEN nothing is wrong
    assert (verdict.dead_lettered, verdict.wrongly_dead_lettered) == (1, 0)


def test_judge_a_poison_unit_with_only_a_dead_letter_is_right(s3: Any):
    # GIVEN a poison crawl dead-lettered as one job: its pages have no record of their own
    pages = [Unit("crawl", POISON_JOB, i) for i in range(3)]
    dead_letter(s3, pages[0].job_dead_letter_key, REASON_POISON)
    # WHEN judged (the simulator says the pages completed)
    verdict = run_judge(s3, [(page, row(kind="crawl_page")) for page in pages])
    # THEN every page is rightly poisoned: not wrong, not lost
    assert (verdict.poisoned, verdict.dead_lettered) == (3, 3)
    assert (verdict.wrongly_dead_lettered, verdict.poison_mishandled, verdict.lost) == (0, 0, 0)


def test_judge_a_poison_unit_stored_or_dead_lettered_for_another_reason_is_mishandled(s3: Any):
    # GIVEN two poison batch items: one stored, one dead-lettered as an unknown job
    stored, closed = Unit("batch", POISON_JOB, 0), Unit("batch", POISON_JOB, 1)
    put(s3, stored.result_key)
    dead_letter(s3, closed.dead_letter_key, "unknown job")
    # WHEN judged
    verdict = run_judge(s3, [(u, row(kind="batch_item")) for u in (stored, closed)])
    # THEN both are mishandled
    assert verdict.poison_mishandled == 2
    assert verdict.poisoned == 1


def test_judge_a_settled_unit_with_nothing_live_is_lost_and_unsettled_work_is_not_judged(
    s3: Any,
):
    # GIVEN a dead letter retired with no result after it, and a job still running
    gone, running = Unit("extract", "gone-1", None), Unit("extract", "running-1", None)
    dead_letter(s3, gone.dead_letter_key, "unknown job")
    s3.delete_object(Bucket=BUCKET, Key=gone.dead_letter_key)
    # WHEN judged
    verdict = run_judge(s3, [(gone, row()), (running, row(status="processing"))])
    # THEN the settled one is lost; the running one is not counted at all
    assert (verdict.settled, verdict.lost) == (1, 1)
    assert verdict.lost_examples == ["extract gone-1 None"]


def test_listing_takes_the_latest_entry_of_each_key():
    # GIVEN a page where one key's latest entry is a delete marker
    page = {
        "Versions": [
            {"Key": "a", "IsLatest": True},
            {"Key": "b", "IsLatest": False},
        ],
        "DeleteMarkers": [{"Key": "b", "IsLatest": True}],
    }
    # WHEN listed
    listing = Listing.from_pages([page])
    # THEN only the object is live; both keys keep their one version
    assert listing.live == {"a"}
    assert listing.versions == {"a": 1, "b": 1}


def refused(delivery_id: str, signed_with: int, at: float, status: int = 401) -> dict[str, Any]:
    return {
        "delivery_id": delivery_id,
        "subscription_id": "wh-1",
        "secret_rotation": signed_with,
        "http_status": status,
        "delivered_at": at,
    }


def test_a_401_is_wrong_unless_its_secret_retired_past_the_grace_or_was_just_switched():
    # GIVEN wh-1 rotated at 100 and 500 (secrets 0, 1 retired then; 2 current), a 60 s grace
    rotated = {"wh-1": [100.0, 500.0]}
    attempts = [
        refused("never-rotated", 0, 50.0),  # secret 0 still current
        refused("in-grace", 0, 159.0),  # secret 0 retired less than 60 s ago
        refused("past-grace", 0, 160.0),  # rightly refused: retired 60 s ago
        refused("switching", 1, 100.0 + SWITCH_SECONDS - 1),  # the bundle catching up
        refused("current", 1, 300.0),
        refused("current-too", 2, 900.0),
        refused("answered", 2, 900.0, status=200),
        {**refused("no-answer", 2, 900.0), "delivered_at": None},
    ]
    # WHEN they are judged THEN only the wrongly refused are named
    found = refusals(attempts, rotated, grace_s=60.0)
    assert found.valid == ["never-rotated", "in-grace", "current", "current-too"]
    assert found.retired == 1
