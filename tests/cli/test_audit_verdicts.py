"""The audit's verdict on one job, and the bucket keys it reads, as pure functions."""

from __future__ import annotations

import pytest

from scrape_pipeline.geonode.models import ApiStatus
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import dead_letter_key, result_prefix
from scrape_pipeline_ops.audit.objects import KeyHistory, parse_key
from scrape_pipeline_ops.audit.subjects import replaced_failures
from scrape_pipeline_ops.audit.verdicts import Subject, Verdict, judge

NOW = 1_800_000_000.0
ONCE = KeyHistory(versions=1, size=10)


def _judge(subject: Subject, files: dict[str, KeyHistory], dead: KeyHistory | None = None):
    return judge(subject, files, dead, now=NOW, grace_s=300.0, replaced=False)


@pytest.mark.parametrize(
    ("kind", "item"), [(JobKind.EXTRACT, None), (JobKind.BATCH, 7), (JobKind.CRAWL, 12345)]
)
def test_keys_written_by_the_result_store_parse_back_to_their_job(kind: JobKind, item: int | None):
    where = (kind, "job-1", item)
    assert parse_key(f"{result_prefix(kind, 'job-1', item)}/content.md") == (
        "results",
        where,
        "content.md",
    )
    assert parse_key(dead_letter_key(kind, "job-1", item)) == ("dead-letters", where, "")


def test_other_keys_are_not_jobs():
    for key in ("runs/r/manifest.json", "submissions/a.txt", "results/other/x/metadata.json"):
        assert parse_key(key) is None


def test_a_content_file_the_formats_call_for_that_is_absent_is_missing():
    subject = Subject(JobKind.EXTRACT, "j", ApiStatus.COMPLETED, files=("content.md",))
    found = _judge(subject, {"metadata.json": ONCE})
    assert (found.verdict, found.why) == (Verdict.MISSING, "content.md not there")


def test_a_failed_job_replaced_by_a_later_job_of_its_url_is_resubmitted():
    first = Subject(JobKind.EXTRACT, "a", ApiStatus.FAILED, url="https://x.test/", created_at=1.0)
    later = Subject(
        JobKind.EXTRACT, "b", ApiStatus.COMPLETED, url="https://x.test/", created_at=2.0
    )
    assert replaced_failures([first, later]) == {first.where}
    verdict = judge(first, {}, None, now=NOW, grace_s=0.0, replaced=True).verdict
    assert verdict is Verdict.RESUBMITTED
    assert _judge(first, {}).verdict is Verdict.MISSING


def test_a_failed_batch_item_retried_as_a_later_extract_job_of_its_url_is_replaced():
    url = "https://x.test/item"
    item = Subject(JobKind.BATCH, "b", ApiStatus.FAILED, item=3, url=url, created_at=1.0)
    sibling = Subject(
        JobKind.BATCH, "b", ApiStatus.FAILED, item=4, url="https://x.test/o", created_at=1.0
    )
    retry = Subject(JobKind.EXTRACT, "r", ApiStatus.COMPLETED, url=url, created_at=5.0)
    assert replaced_failures([item, sibling, retry]) == {item.where}


def test_a_retired_dead_letter_does_not_speak_for_a_job():
    subject = Subject(JobKind.EXTRACT, "j", ApiStatus.FAILED)
    retired = KeyHistory(versions=1, latest_deleted=True)
    found = _judge(subject, {}, retired)
    assert found.verdict is Verdict.MISSING and "dead-letter record deleted" in found.why
    assert _judge(subject, {}, ONCE).verdict is Verdict.DEAD_LETTERED


def test_a_job_unknown_to_the_api_is_missing_unless_dead_lettered():
    subject = Subject(JobKind.BATCH, "gone", None)
    assert _judge(subject, {}).verdict is Verdict.MISSING
    assert _judge(subject, {}, ONCE).verdict is Verdict.DEAD_LETTERED


def test_a_job_settled_within_the_grace_is_settling_unless_an_object_of_it_was_deleted():
    subject = Subject(JobKind.EXTRACT, "j", ApiStatus.COMPLETED, settled_at=NOW - 10.0)
    assert _judge(subject, {}).verdict is Verdict.SETTLING
    assert _judge(subject, {"content.md": ONCE}).verdict is Verdict.SETTLING  # being written
    deleted = {"metadata.json": KeyHistory(versions=1, latest_deleted=True)}
    found = _judge(subject, deleted)
    assert found.verdict is Verdict.MISSING and "metadata.json deleted" in found.why
