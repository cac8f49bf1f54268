"""``audit``: the window's jobs judged from the simulator's API over HTTP and a versioned moto
bucket; results planted with ``ResultStore``, damage done to the bucket by the test."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import result_prefix
from tests.cli.audit_fixtures import BUCKET, World, world
from tests.cli.conftest import Cli, Result, assert_one_error_line

__all__ = ["world"]  # the fixture, imported for pytest


def _audit(cli: Cli, w: World, *extra: str) -> Result:
    return cli("audit", "--since", w.since(2 * 86_400.0), "--json", *extra, clock=w.clock)


def _failed(result: Result, *needles: str) -> list[str]:
    """Exit 1: the notices above name each problem; the last line is the one error line."""
    *notices, last = result.err.splitlines()
    assert_one_error_line(Result(result.code, result.out, last), 1, *needles)
    return notices


def _batch(cli: Cli, w: World, path: Path, urls: int, *options: str) -> str:
    """One batch of ``urls`` URLs submitted through the CLI (known to the runs journal)."""
    path.write_text("".join(f"https://example.com/{path.stem}/{i}\n" for i in range(urls)))
    submitted = cli("submit", str(path), "--mode", "batch", *options, "--json", clock=w.clock)
    assert submitted.code == 0, submitted.err
    [line] = submitted.records()
    return str(line["job_id"])


def _store_items(w: World, batch_id: str, count: int) -> list[Any]:
    """The batch's first ``count`` items stored as the processor stores them; all its items."""
    from scrape_pipeline.processor.results import metadata_of

    items = list(w.client.iter_batch_items(batch_id))
    for item in items[:count]:
        assert item.input_index is not None
        w.store.store(
            JobKind.BATCH, batch_id, item.data, metadata_of(item.raw), item=item.input_index
        )
    return items


COUNTED = ("jobs", "stored", "dead_lettered", "cancelled", "running", "doubled", "missing")


def _counts(record: dict[str, object]) -> tuple[object, ...]:
    """The record's counts, in ``COUNTED``'s order."""
    return tuple(record[name] for name in COUNTED)


def test_audit_of_a_clean_window_counts_every_job_stored_once(world: World, cli: Cli):
    # GIVEN four settled jobs, each stored by ResultStore
    jobs = world.submit(4, "clean", ("markdown", "links"))
    world.settle()
    world.stored(jobs)
    # WHEN the window is audited
    result = _audit(cli, world)
    # THEN every job is stored exactly once, nothing else, exit 0
    assert result.code == 0, result.err
    record = result.record()
    assert _counts(record) == (4, 4, 0, 0, 0, 0, 0)
    assert record["problems"] == []


def test_audit_names_a_job_whose_result_object_was_deleted(world: World, cli: Cli):
    # GIVEN three stored jobs; one loses content.md (a delete marker), another its
    # metadata.json for good (every version deleted), a third is never stored at all
    jobs = world.submit(4, "deleted", ("markdown", "html"))
    world.settle()
    world.stored(jobs[:3])
    world.s3.delete_object(
        Bucket=BUCKET, Key=f"{result_prefix(JobKind.EXTRACT, jobs[0])}/content.md"
    )
    metadata = f"{result_prefix(JobKind.EXTRACT, jobs[1])}/metadata.json"
    for version in world.s3.list_object_versions(Bucket=BUCKET, Prefix=metadata)["Versions"]:
        world.s3.delete_object(Bucket=BUCKET, Key=metadata, VersionId=version["VersionId"])
    # WHEN audited
    result = _audit(cli, world)
    # THEN three are missing, each named on stderr and in the record; exit 1
    notices = _failed(result, "3 missing, 0 doubled", jobs[0])
    record = result.record()
    assert (record["stored"], record["missing"]) == (1, 3)
    assert {p["job_id"] for p in record["problems"]} == {jobs[0], jobs[1], jobs[3]}
    named = "\n".join(notices)
    for job_id in (jobs[0], jobs[1], jobs[3]):
        assert f"missing: extract {job_id}" in named
    [first] = [p for p in record["problems"] if p["job_id"] == jobs[0]]
    assert "content.md" in first["why"]


def test_audit_names_a_doubled_result(world: World, cli: Cli):
    # GIVEN two stored jobs, and a second version of one's metadata.json planted
    jobs = world.submit(2, "doubled")
    world.settle()
    world.stored(jobs)
    key = f"{result_prefix(JobKind.EXTRACT, jobs[1])}/metadata.json"
    world.s3.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
    # WHEN audited
    result = _audit(cli, world)
    # THEN it is doubled, named; exit 1
    notices = _failed(result, "0 missing, 1 doubled", jobs[1])
    record = result.record()
    assert (record["stored"], record["doubled"], record["missing"]) == (1, 1, 0)
    assert any(f"doubled: extract {jobs[1]}" in line for line in notices)
    assert "metadata.json has 2 versions" in record["problems"][0]["why"]


def test_audit_counts_dead_letters_by_reason_cancelled_and_running_jobs(world: World, cli: Cli):
    # GIVEN one stored job, two dead-lettered (two reasons), one cancelled, two still running,
    # and one settled a moment ago that is not stored yet
    stored, poisoned, failed = world.submit(3, "mixed")
    world.settle()
    world.stored([stored])
    world.store.dead_letter(JobKind.EXTRACT, poisoned, {"job_id": poisoned, "reason": "poison"})
    world.store.dead_letter(JobKind.EXTRACT, failed, {"job_id": failed, "reason": "not retryable"})
    [cancelled] = world.submit(1, "cancelled")
    world.sim.sim.cancel_extract(cancelled)
    running = world.sim.sim.add_background_jobs("audit-cli-key", 2, age_s=30.0)
    [recent] = world.submit(1, "recent")
    world.clock.advance(60.0)  # settled (at most 20 s), not yet stored: within the grace
    # WHEN audited
    result = _audit(cli, world)
    # THEN each is counted under its verdict; nothing is missing; exit 0
    assert result.code == 0, result.err
    record = result.record()
    assert _counts(record) == (7, 1, 2, 1, 2, 0, 0)
    assert record["settling"] == 1
    assert record["dead_lettered_by_reason"] == {"not retryable": 1, "poison": 1}
    assert len(running) == 2 and recent
    # AND without the grace the recent one is missing, named
    strict = _audit(cli, world, "--grace", "0")
    _failed(strict, "1 missing", recent)


def test_audit_run_restricts_to_the_runs_jobs(world: World, cli: Cli, tmp_path: Path):
    # GIVEN two async runs submitted through the CLI, both settled; only run "a" stored,
    # and one job outside any run stored too
    for name, n in (("a", 3), ("b", 2)):
        urls = tmp_path / f"{name}.txt"
        urls.write_text("".join(f"https://example.com/run-{name}/{i}\n" for i in range(n)))
        submitted = cli(
            "submit", str(urls), "--mode", "async", "--run", name, "--json", clock=world.clock
        )
        assert submitted.code == 0, submitted.err
        if name == "a":
            a_jobs = [r["job_id"] for r in submitted.records()]
    other = world.submit(1, "outside")
    world.settle()
    world.stored([*a_jobs, *other])
    # WHEN run "a" is audited
    result = _audit(cli, world, "--run", "a")
    # THEN only its three jobs are judged: all stored
    assert result.code == 0, result.err
    record = result.record()
    assert (record["run"], record["jobs"], record["stored"]) == ("a", 3, 3)
    # AND run "b"'s two jobs, never stored, are missing; the whole window has them too
    _failed(_audit(cli, world, "--run", "b"), "2 missing")
    whole = _audit(cli, world)
    assert whole.record()["jobs"] == 6


def test_audit_judges_batch_items_from_the_api_and_their_item_keys(
    world: World, cli: Cli, tmp_path: Path
):
    # GIVEN a batch of five URLs submitted as a run; four items stored, one never
    batch_id = _batch(cli, world, tmp_path / "batch.txt", 5, "--run", "bt")
    world.settle()
    items = _store_items(world, batch_id, 4)
    # WHEN the window is audited (the batch known from the runs journal)
    result = _audit(cli, world)
    # THEN each item is a job: four stored, the fifth missing, named with its index
    notices = _failed(result, "1 missing")
    record = result.record()
    assert (record["jobs"], record["stored"], record["missing"]) == (5, 4, 1)
    assert record["problems"][0]["item"] == items[4].input_index
    assert f"missing: batch {batch_id} item {items[4].input_index}" in "\n".join(notices)
    # AND audited as its run: the same verdicts, without a job-list page, one batch page
    run = _audit(cli, world, "--run", "bt")
    _failed(run, "1 missing")
    assert run.record()["calls"]["job_list_pages"] == 0
    assert run.record()["calls"]["batch_crawl_pages"] == 1
    assert (run.record()["stored"], run.record()["missing"]) == (4, 1)


def test_audit_holds_its_call_budget_for_hundreds_of_jobs(world: World, cli: Cli):
    # GIVEN 350 settled jobs stored with three objects each (1,050 keys) and 5 dead letters
    jobs = world.submit(355, "budget", ("markdown", "links"))
    world.settle()
    world.stored(jobs[:350])
    for job_id in jobs[350:]:
        world.store.dead_letter(JobKind.EXTRACT, job_id, {"job_id": job_id, "reason": "poison"})
    world.sim.sim.list_requests()  # (nothing listed yet)
    before = len(world.sim.sim.list_requests())
    world.s3_calls.reset()
    # WHEN audited
    result = _audit(cli, world)
    # THEN all are accounted for, with one job-list page per 100 jobs ...
    assert result.code == 0, result.err
    record = result.record()
    assert (record["stored"], record["dead_lettered"]) == (350, 5)
    pages = world.sim.sim.list_requests()[before:]
    assert len(pages) <= math.ceil(355 / 100)
    assert all(p["page_size"] == 100 for p in pages)
    # ... and S3 listed once per 1,000 keys and prefix: no HEAD, no GET but the dead letters
    listed = record["calls"]["s3_entries_listed"]
    assert listed == 350 * 3 + 5
    prefixes = 2  # results/extract/ and dead-letters/extract/
    assert world.s3_calls.counts.get("ListObjectVersions") == record["calls"]["s3_list_calls"]
    assert world.s3_calls.counts["ListObjectVersions"] <= math.ceil(listed / 1000) + prefixes - 1
    assert world.s3_calls.counts.get("HeadObject", 0) == 0
    assert world.s3_calls.counts.get("GetObject", 0) == 5


def test_audit_rejects_a_bad_window_and_an_unknown_run(world: World, cli: Cli):
    assert_one_error_line(cli("audit", "--since", "yesterday"), 2, "--since", "ISO 8601")
    bad = cli("audit", "--since", "2030-01-02T00:00:00Z", "--until", "2030-01-01T00:00:00Z")
    assert_one_error_line(bad, 2, "--until is before --since")
    assert_one_error_line(_audit(cli, world, "--run", "nope"), 2)


def test_audit_lists_each_prefix_once_per_1000_keys_however_many_jobs(
    world: World, cli: Cli, tmp_path: Path
):
    # GIVEN a 600-URL batch stored item by item (1,200 keys under results/batch/) and 150
    # extract jobs (300 keys under results/extract/): more than 1,000 keys in the window
    batch_id = _batch(cli, world, tmp_path / "big-batch.txt", 600, "--batch-size", "600")
    jobs = world.submit(150, "many")
    world.settle()
    _store_items(world, batch_id, 600)
    world.stored(jobs)
    listed = {prefix: len(world.keys(prefix)) for prefix in ("results/batch/", "results/extract/")}
    assert listed == {"results/batch/": 1200, "results/extract/": 300}
    before = len(world.sim.sim.list_requests())
    world.s3_calls.reset()
    # WHEN the window is audited
    result = _audit(cli, world)
    # THEN all 750 are stored once ...
    assert result.code == 0, result.err
    assert (result.record()["jobs"], result.record()["stored"]) == (750, 750)
    # ... S3 was listed page by page per prefix, counted by botocore's hook on the CLI's client:
    # two calls for the batch's 1,200 keys, one for the extracts' 300, one per empty
    # dead-letter prefix; never a call per job
    assert world.s3_calls.counts == {"ListObjectVersions": 2 + 1 + 2}
    # ... and the job list read at one page per 100 extract jobs
    assert len(world.sim.sim.list_requests()[before:]) <= math.ceil(150 / 100)
