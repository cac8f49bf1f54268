"""``results get``: a result found by job id or by URL (the runs journal, else the API's job
list), printed or written byte for byte; the simulator over HTTP and a versioned moto bucket."""

from __future__ import annotations

from pathlib import Path

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import result_prefix
from tests.cli.audit_fixtures import BUCKET, World, world
from tests.cli.conftest import Cli, assert_one_error_line

__all__ = ["world"]  # the fixture, imported for pytest


def _body(w: World, key: str) -> bytes:
    return bytes(w.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_results_get_by_id_prints_the_bucket_keys_and_size(world: World, cli: Cli):
    # GIVEN a stored job with two formats
    [job_id] = world.submit(1, "by-id", ("markdown", "html"))
    world.settle()
    world.stored([job_id])
    prefix = result_prefix(JobKind.EXTRACT, job_id)
    # WHEN it is looked up by id
    result = cli("results", "get", job_id, "--json", clock=world.clock)
    # THEN the bucket, its three keys and their total size are printed
    assert result.code == 0, result.err
    record = result.record()
    keys = sorted(world.keys(prefix))
    assert keys == [f"{prefix}/{n}" for n in ("content.html", "content.md", "metadata.json")]
    assert (record["bucket"], record["kind"], record["prefix"]) == (BUCKET, "extract", prefix)
    assert record["keys"] == keys
    assert record["size"] == sum(len(_body(world, k)) for k in keys)


def test_results_get_by_url_through_the_runs_journal_writes_the_files(
    world: World, cli: Cli, tmp_path: Path
):
    # GIVEN a URL submitted twice as two runs (two jobs), only the later job stored
    url = "https://example.com/by-url/journal"
    jobs = []
    for name in ("first", "second"):
        urls = tmp_path / f"{name}.txt"
        urls.write_text(f"{url}\n")
        done = cli(
            "submit", str(urls), "--mode", "async", "--run", name, "--json", clock=world.clock
        )
        assert done.code == 0, done.err
        jobs.append(done.record()["job_id"])
        world.clock.advance(5.0)
    world.settle()
    world.stored([jobs[1]])
    # WHEN it is looked up by URL with --out
    out = tmp_path / "out"
    result = cli("results", "get", url, "--out", str(out), "--json", clock=world.clock)
    # THEN the stored job's objects are in DIR, byte for byte
    assert result.code == 0, result.err
    assert result.record()["job_id"] == jobs[1]
    prefix = result_prefix(JobKind.EXTRACT, jobs[1])
    for name in ("content.md", "metadata.json"):
        assert (out / name).read_bytes() == _body(world, f"{prefix}/{name}")
    assert sorted(p.name for p in out.iterdir()) == ["content.md", "metadata.json"]


def test_results_get_by_url_through_the_job_list_checks_the_metadata(world: World, cli: Cli):
    # GIVEN two jobs no run knows (submitted elsewhere), both stored
    [job_id] = world.submit(1, "by-url-list")
    [other] = world.submit(1, "by-url-other")
    world.settle()
    world.stored([job_id, other])
    url = "https://example.com/by-url-list/0"
    # WHEN looked up by URL
    result = cli("results", "get", url, "--json", clock=world.clock)
    # THEN the job list named the job, and its metadata.json agreed
    assert result.code == 0, result.err
    assert result.record()["job_id"] == job_id
    # AND once the other job's metadata.json names another URL, its URL finds nothing: exit 1
    key = f"{result_prefix(JobKind.EXTRACT, other)}/metadata.json"
    world.s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"metadata": {"url": "https://x.test/"}}')
    lost = cli("results", "get", "https://example.com/by-url-other/0", clock=world.clock)
    assert_one_error_line(lost, 1, "no stored result for https://example.com/by-url-other/0")


def test_results_get_of_a_batch_writes_each_item_in_its_folder(
    world: World, cli: Cli, tmp_path: Path
):
    # GIVEN a batch of two URLs, both items stored
    from scrape_pipeline.processor.results import metadata_of

    urls = tmp_path / "batch.txt"
    urls.write_text("https://example.com/rg-batch/0\nhttps://example.com/rg-batch/1\n")
    done = cli("submit", str(urls), "--mode", "batch", "--json", clock=world.clock)
    assert done.code == 0, done.err
    batch_id = done.record()["job_id"]
    world.settle()
    for item in world.client.iter_batch_items(batch_id):
        world.store.store(
            JobKind.BATCH, batch_id, item.data, metadata_of(item.raw), item=item.input_index
        )
    # WHEN the batch is fetched by id, and its second URL by URL
    out = tmp_path / "out"
    whole = cli("results", "get", batch_id, "--out", str(out), "--json", clock=world.clock)
    one = cli("results", "get", "https://example.com/rg-batch/1", "--json", clock=world.clock)
    # THEN one line per item, each item's files in its index folder; the URL is item 1
    assert whole.code == 0, whole.err
    assert [r["item"] for r in whole.records()] == [0, 1]
    for index in (0, 1):
        prefix = result_prefix(JobKind.BATCH, batch_id, index)
        assert (out / f"{index:05d}" / "metadata.json").read_bytes() == _body(
            world, f"{prefix}/metadata.json"
        )
    assert one.code == 0, one.err
    assert (one.record()["job_id"], one.record()["item"]) == (batch_id, 1)


def test_results_get_of_an_unknown_or_dead_lettered_job_is_one_error_line(world: World, cli: Cli):
    [dead] = world.submit(1, "dead")
    world.settle()
    world.store.dead_letter(JobKind.EXTRACT, dead, {"job_id": dead, "reason": "poison"})
    assert_one_error_line(cli("results", "get", "no-such-job"), 1, "no result for job no-such-job")
    assert_one_error_line(
        cli("results", "get", dead), 1, "dead-lettered", f"dead-letters/extract/{dead}.json"
    )
    assert_one_error_line(cli("results", "get", "../etc"), 2, "not a job id nor an http(s) URL")
    assert_one_error_line(cli("results", "get", "https://example.com/never"), 1, "no stored result")
