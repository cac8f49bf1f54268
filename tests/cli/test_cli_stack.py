"""The CLI against a real local stack: what it did is checked in the simulator, moto and files.

One stack for the module; every test uses its own URLs and subscriptions and leaves the
shared ones (the stack's three subscriptions, the DLQ) as it found them.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.attributes import RowPrefix
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobMessage
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline_local.simulator.subscriptions import Subscription
from scrape_pipeline_local.stack import API_KEY, LocalStack
from tests.cli.conftest import Cli, Result, assert_one_error_line


def _urls(tag: str, n: int) -> list[str]:
    return [f"https://example.com/cli/{tag}/{i}" for i in range(n)]


def _truth(stack: LocalStack, kind: str, urls: list[str]) -> list[dict[str, Any]]:
    return [j for j in stack.sim.truth_jobs(kind) if j["url"] in urls]


def _sub(stack: LocalStack, webhook_id: str) -> Subscription:
    """The simulator's own record of a subscription (its secret included)."""
    found = stack.sim.subscriptions.find(webhook_id)
    assert found is not None
    return found


def _row_source(stack: LocalStack, kind: JobKind, job_id: str) -> str | None:
    assert stack.resources is not None
    row = Ledger(stack.resources.table, client=boto3.client("dynamodb")).get(JobKey(kind, job_id))
    return None if row is None else row.source


def _bundle(stack: LocalStack) -> dict[str, list[dict[str, Any]]]:
    """The stored secrets by webhook id."""
    assert stack.resources is not None
    value = boto3.client("secretsmanager").get_secret_value(
        SecretId=stack.resources.webhook_secret_arn
    )["SecretString"]
    secrets: dict[str, list[dict[str, Any]]] = json.loads(value)["subscriptions"]
    return secrets


# -- submit --------------------------------------------------------------------------------


def test_submit_async_prints_one_line_per_job_from_stdin(live: LocalStack, cli: Cli):
    # GIVEN three URLs on stdin, with a comment and a blank line
    urls = _urls("async", 3)
    text = "# jobs\n" + "\n".join(urls[:2]) + "\n\n" + urls[2] + "\n"
    # WHEN they are submitted in async mode
    result = cli("submit", "-", "--mode", "async", "--json", stdin=text)
    # THEN one line per job, and the simulator saw exactly these async jobs, once each
    assert result.code == 0, result.err
    lines = result.records()
    assert [line["url"] for line in lines] == urls
    assert {line["kind"] for line in lines} == {"extract"}
    truth = {j["job_id"]: j for j in _truth(live, "extract", urls)}
    assert set(truth) == {line["job_id"] for line in lines}
    assert {j["processing_mode"] for j in truth.values()} == {"async"}
    submissions = live.sim.submissions()
    assert [submissions[u] for u in urls] == [1, 1, 1]


def test_submit_sync_writes_content_and_metadata(live: LocalStack, cli: Cli, tmp_path: Path):
    urls = _urls("sync", 2)
    source = tmp_path / "urls.txt"
    source.write_text("\n".join(urls) + "\n")
    result = cli(
        "submit", str(source), "--mode", "sync", "--formats", "markdown,html",
        "--out", str(tmp_path / "out"), "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    lines = result.records()
    assert [line["url"] for line in lines] == urls
    assert {j["processing_mode"] for j in _truth(live, "extract", urls)} == {"sync"}
    for line in lines:
        folder = Path(line["written"])
        assert folder.parent == tmp_path / "out"
        assert (folder / "content.md").read_text().strip()
        assert "<" in (folder / "content.html").read_text()
        metadata = json.loads((folder / "metadata.json").read_text())
        assert metadata["metadata"]["url"] == line["url"] == line["metadata"]["url"]


def test_submit_batch_is_one_job_for_every_url(live: LocalStack, cli: Cli):
    urls = _urls("batch", 4)
    result = cli("submit", "--mode", "batch", "--json", stdin="\n".join(urls))
    assert result.code == 0, result.err
    line = result.record()
    assert line["kind"] == "batch" and line["urls"] == 4
    items = _truth(live, "batch_item", urls)
    assert sorted(i["url"] for i in items) == urls
    assert {i["job_id"] for i in items} == {line["job_id"]}
    # announced to the ledger: no API lists batches
    assert line["announced"] is True
    assert _row_source(live, JobKind.BATCH, line["job_id"]) == "submitted"


def test_submit_crawl_passes_max_pages(live: LocalStack, cli: Cli):
    [url] = _urls("crawl", 1)
    result = cli("submit", "--mode", "crawl", "--max-pages", "3", "--json", stdin=url)
    assert result.code == 0, result.err
    line = result.record()
    assert line["kind"] == "crawl"
    pages = [p for p in live.sim.truth_jobs("crawl_page") if p["job_id"] == line["job_id"]]
    assert 1 <= len(pages) <= 3
    assert pages[0]["url"] == url
    assert line["announced"] is True
    assert _row_source(live, JobKind.CRAWL, line["job_id"]) == "submitted"


def test_submit_rejected_url_is_reported_and_the_rest_go_on(live: LocalStack, cli: Cli):
    # GIVEN a URL with no host (the API answers 422) between two good ones
    good = _urls("rejected", 2)
    result = cli("submit", "--json", stdin="\n".join([good[0], "https://:80", good[1]]))
    # THEN the good ones are submitted, the bad one reported, and the run exits 1
    # (stderr: the line naming the run, then the one error line)
    run_line, error_line = result.err.splitlines()
    assert run_line.startswith("scrape-pipeline: run async-")
    assert_one_error_line(Result(result.code, result.out, error_line), 1, "1 of 3")
    lines = result.records()
    assert [line["status"] for line in lines] == ["queued", "rejected", "queued"]
    assert len(_truth(live, "extract", good)) == 2


# -- poll ----------------------------------------------------------------------------------


def test_poll_writes_each_settled_job_once(live: LocalStack, cli: Cli, tmp_path: Path):
    # GIVEN three jobs submitted by the CLI, their JSON lines piped to poll
    urls = _urls("poll", 3)
    submitted = cli("submit", "--json", stdin="\n".join(urls))
    assert submitted.code == 0, submitted.err
    ids = [line["job_id"] for line in submitted.records()]
    before = live.sim.request_counts()["by_route"].get("GET /v1/extract/{job_id}", 0)
    # WHEN poll runs on the stack's manual clock (its waits move simulated time)
    result = cli(
        "poll", "--from", "-", "--out", str(tmp_path), "--max-wait", "600", "--json",
        stdin=submitted.out, clock=live.clock,
    )  # fmt: skip
    # THEN every job is reported once, completed, and written once under <out>/<job_id>/
    assert result.code == 0, result.err
    lines = result.records()
    assert sorted(line["job_id"] for line in lines) == sorted(ids)
    assert {line["status"] for line in lines} == {"completed"}
    for job_id in ids:
        assert (tmp_path / job_id / "content.md").read_text().strip()
        assert json.loads((tmp_path / job_id / "metadata.json").read_text())["job_id"] == job_id
    # each settled job was fetched once: the hints from submit saved the first GETs
    after = live.sim.request_counts()["by_route"].get("GET /v1/extract/{job_id}", 0)
    assert after - before == len(ids)


def test_poll_plain_ids_of_settled_jobs_to_s3(live: LocalStack, cli: Cli):
    # GIVEN jobs that settled before the poll started, given as plain ids
    client = live.client()
    ids = [client.submit_extract(url).job_id for url in _urls("poll-s3", 2)]
    live.clock.advance(60)
    # WHEN polled into s3://bucket/prefix
    assert live.resources is not None
    bucket = live.resources.bucket
    result = cli("poll", *ids, "--out", f"s3://{bucket}/cli-poll", "--json", clock=live.clock)
    # THEN the results are under the prefix with the pipeline's own keys
    assert result.code == 0, result.err
    s3 = boto3.client("s3")
    for job_id in ids:
        key = f"cli-poll/results/extract/{job_id}/metadata.json"
        body = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        assert body["job_id"] == job_id
    assert {line["written"] for line in result.records()} == {
        f"s3://{bucket}/cli-poll/results/extract/{job_id}" for job_id in ids
    }


def test_poll_unsettled_by_deadline_exits_1_listing_them(live: LocalStack, cli: Cli):
    # an id the API does not know, with a deadline shorter than the 404 grace
    job_id = str(uuid.uuid4())
    result = cli("poll", job_id, "--max-wait", "20", "--json", clock=live.clock)
    assert_one_error_line(result, 1, job_id, "not settled")
    assert result.records() == [{"job_id": job_id, "status": "unsettled", "written": None}]


def test_poll_reports_an_unknown_id_after_the_404_grace_not_the_whole_wait(
    live: LocalStack, cli: Cli
):
    # GIVEN a well-formed id the API answers 404 for, beside a real job
    [submitted] = cli("submit", "--json", stdin=_urls("poll-unknown", 1)[0]).records()
    unknown = str(uuid.uuid4())
    started = live.clock.time()
    # WHEN both are polled with the default hour of --max-wait
    result = cli("poll", unknown, submitted["job_id"], "--json", clock=live.clock)
    # THEN the real one is reported settled, the unknown one after the 60 s grace, exit 1
    line = assert_one_error_line(result, 1, "1 of 2 job(s) unknown to the API", unknown)
    assert submitted["job_id"] not in line
    statuses = {r["job_id"]: r["status"] for r in result.records()}
    assert statuses == {unknown: "unknown", submitted["job_id"]: "completed"}
    assert 60 <= live.clock.time() - started < 100


# -- webhooks ------------------------------------------------------------------------------


def test_webhooks_register_list_disable_enable_delete(live: LocalStack, cli: Cli):
    assert live.resources is not None and live.front is not None
    secret_id = live.resources.webhook_secret_arn
    url = live.front.url("/webhooks/geonode")
    before = _bundle(live)
    # register: the new secret goes into the bundle, its own entry, and is not printed
    result = cli(
        "webhooks", "register", url, "batch_completed", "--description", "cli test",
        "--store-secret", secret_id, "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    hook = result.record()
    secret = _sub(live, hook["id"]).secret
    assert _bundle(live) == {**before, hook["id"]: [{"value": secret, "expires_at": None}]}
    assert secret not in result.out + result.err and "secret" not in hook
    assert hook["secret_stored_in"] == secret_id

    listed = cli("webhooks", "list", "--json").records()
    assert {"id": hook["id"], "description": "cli test"}.items() <= next(
        h for h in listed if h["id"] == hook["id"]
    ).items()

    assert cli("webhooks", "disable", hook["id"], "--json").record()["is_active"] is False
    assert _sub(live, hook["id"]).is_active is False
    assert cli("webhooks", "enable", hook["id"], "--json").record()["is_active"] is True
    assert _sub(live, hook["id"]).is_active is True

    assert cli("webhooks", "delete", hook["id"], "--json").record() == {
        "id": hook["id"],
        "deleted": True,
    }
    assert hook["id"] not in {h["id"] for h in cli("webhooks", "list", "--json").records()}


def test_webhooks_register_show_secret_prints_it(live: LocalStack, cli: Cli):
    assert live.front is not None
    result = cli(
        "webhooks", "register", live.front.url("/x"), "crawl_completed", "--show-secret",
        "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    hook = result.record()
    assert hook["secret"] == _sub(live, hook["id"]).secret
    assert cli("webhooks", "delete", hook["id"]).code == 0


def test_webhooks_register_fails_before_creating_when_the_store_is_unreachable(
    live: LocalStack, cli: Cli
):
    assert live.front is not None
    before = {h["id"] for h in cli("webhooks", "list", "--json").records()}
    result = cli(
        "webhooks", "register", live.front.url("/webhooks/geonode"), "batch_completed",
        "--store-secret", "no-such-secret",
    )  # fmt: skip
    assert_one_error_line(result, 1, "GetSecretValue")
    assert {h["id"] for h in cli("webhooks", "list", "--json").records()} == before


def test_webhooks_unknown_id_is_one_line_exit_1(live: LocalStack, cli: Cli):
    result = cli("webhooks", "disable", "no-such-webhook")
    assert_one_error_line(result, 1, "404")


# -- deliveries and rotation -----------------------------------------------------------------


def test_deliveries_replay_enqueues_jobs_rejected_with_401(live: LocalStack, cli: Cli):
    # GIVEN a subscription whose secret the receiver never got (every delivery 401s), and the
    # stack's own extract subscription off, so no delivery records the jobs
    assert live.front is not None and live.resources is not None
    own = live.webhook_ids["extract_completed"]
    registered = cli(
        "webhooks", "register", live.front.url("/webhooks/geonode"), "extract_completed",
        "--show-secret", "--json",
    )  # fmt: skip
    hook = registered.record()["id"]
    live.sim.set_webhook_active(own, False)
    try:
        client = live.client()
        ids = {client.submit_extract(url).job_id for url in _urls("replay", 2)}
        for _ in range(30):
            live.step(1.0)
        # WHEN the delivery log is read and the 401s replayed
        failed = cli("deliveries", "list", hook, "--status", "failed", "--json").records()
        replay = cli(
            "deliveries", "replay", hook, "--since-minutes", "10", "--status-code", "401",
            "--json", clock=live.clock,
        )  # fmt: skip
        # THEN both jobs are in the ledger and on the queue
        assert {d["job_id"] for d in failed} == ids
        assert {d["http_status"] for d in failed} == {401}
        assert replay.code == 0, replay.err
        assert replay.record()["enqueued"] == 2
        ledger = Ledger(live.resources.table, client=boto3.client("dynamodb"))
        rows = ledger.get_many([JobKey(JobKind.EXTRACT, i) for i in ids])
        assert len(rows) == 2
        # a second replay finds them enqueued already
        again = cli("deliveries", "replay", hook, "--since-minutes", "10", "--json")
        assert again.record()["enqueued"] == 0
    finally:
        live.sim.set_webhook_active(own, True)
        cli("webhooks", "delete", hook)
        live.step(1.0)


def test_deliveries_list_limits_and_shows_attempts(live: LocalStack, cli: Cli):
    client = live.client()
    for url in _urls("deliveries", 3):
        client.submit_extract(url)
    for _ in range(25):
        live.step(1.0)
    hook = live.webhook_ids["extract_completed"]
    result = cli("deliveries", "list", hook, "--limit", "2", "--json")
    assert result.code == 0, result.err
    rows = result.records()
    assert len(rows) == 2
    assert all(r["event_type"] == "extract_completed" and r["job_id"] for r in rows)


def test_webhooks_rotate_secret_keeps_previous_with_expiry(live: LocalStack, cli: Cli):
    # GIVEN a subscription registered through the CLI, its secret in the bundle
    assert live.front is not None and live.resources is not None
    secret_id = live.resources.webhook_secret_arn
    hook = cli(
        "webhooks", "register", live.front.url("/webhooks/geonode"), "batch_completed",
        "--store-secret", secret_id, "--json",
    ).record()["id"]  # fmt: skip
    old_secret = _sub(live, hook).secret
    before = _bundle(live)
    try:
        # WHEN its secret is rotated with the default grace period, replay included
        result = cli(
            "webhooks", "rotate-secret", hook, "--secret-id", secret_id, "--json",
            clock=live.clock,
        )  # fmt: skip
        assert result.code == 0, result.err
        report = result.record()
        new_secret = _sub(live, hook).secret
        # THEN its new secret comes first with no expiry, its previous one stays, expiring;
        # the other subscriptions' secrets are untouched
        after = _bundle(live)
        assert new_secret != old_secret
        until = report["previous_valid_until"].replace("Z", "+00:00")
        assert after.pop(hook) == [
            {"value": new_secret, "expires_at": None},
            {"value": old_secret, "expires_at": until},
        ]
        assert after == {i: group for i, group in before.items() if i != hook}
        assert report["secrets_kept"] == 1
        assert report["replayed"] == 0
        assert new_secret not in result.out + result.err
    finally:
        cli("webhooks", "delete", hook)


# -- reconcile, status, dlq ------------------------------------------------------------------


def test_reconcile_enqueues_jobs_the_webhooks_missed(live: LocalStack, cli: Cli):
    # GIVEN two jobs that settled while the extract subscription was off
    assert live.resources is not None
    own = live.webhook_ids["extract_completed"]
    live.sim.set_webhook_active(own, False)
    try:
        client = live.client()
        ids = [client.submit_extract(url).job_id for url in _urls("reconcile", 2)]
        live.step(700.0)  # past the reconciler's threshold
        # WHEN a reconciliation runs now
        result = cli("reconcile", "--json", clock=live.clock)
    finally:
        live.sim.set_webhook_active(own, True)
    # THEN the job-list sweep found them, and the ledger has them
    assert result.code == 0, result.err
    report = result.record()
    assert report["recovered"]["job_list"] >= 2
    assert report["watermark"] is not None
    # AND it says what the scheduled Lambda's log line says, field for field
    assert list(report) == list(ReconcileReport().summary())
    ledger = Ledger(live.resources.table, client=boto3.client("dynamodb"))
    assert len(ledger.get_many([JobKey(JobKind.EXTRACT, i) for i in ids])) == 2
    live.step(1.0)


def test_status_counts_ledger_rows_queues_and_watermark(live: LocalStack, cli: Cli):
    # GIVEN a pipeline with processed jobs and a reconciler checkpoint
    client = live.client()
    for url in _urls("status", 2):
        client.submit_extract(url)
    for _ in range(25):
        live.step(1.0)
    assert cli("reconcile", clock=live.clock).code == 0
    # WHEN status is asked for
    result = cli("status", "--json")
    assert result.code == 0, result.err
    status = result.record()
    # THEN its counts match a full read of the table, and the queues' own attributes
    assert live.resources is not None
    items = boto3.client("dynamodb").scan(TableName=live.resources.table)["Items"]
    # Bookkeeping rows (the runs' journal among them, with a stack) are not jobs.
    jobs = [i for i in items if not i["pk"]["S"].startswith(tuple(RowPrefix))]
    assert status["ledger"]["jobs"] == len(jobs) >= 2
    done = [i for i in jobs if i["state"]["S"] == "DONE"]
    assert status["ledger"]["by_state"].get("DONE", 0) == len(done) >= 2
    assert sum(status["ledger"]["by_outcome"].values()) == len(done)
    assert status["dlq"] == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert status["reconciler"]["watermark"] is not None
    # the human form shows the same numbers
    human = cli("status")
    assert human.code == 0
    assert re.search(rf"^jobs\s+{len(jobs)}$", human.out, re.MULTILINE), human.out


def test_dlq_inspect_then_redrive(live: LocalStack, cli: Cli):
    # GIVEN two dead letters
    assert live.resources is not None
    sqs = boto3.client("sqs")
    bodies = [JobMessage(JobKey(JobKind.EXTRACT, f"dead-{i}"), "test").to_json() for i in range(2)]
    for body in bodies:
        sqs.send_message(QueueUrl=live.resources.dlq_url, MessageBody=body)
    # WHEN inspected (twice): bodies and receive counts, nothing consumed
    # (moto makes a message visible strictly after its visible-at instant: on a manual clock
    # that instant must pass, as it does at once on a real one)
    first = cli("dlq", "inspect", "--json")
    live.clock.advance(0.01)
    second = cli("dlq", "inspect", "--json")
    live.clock.advance(0.01)
    assert first.code == 0, first.err
    assert sorted(json.dumps(r["body"], separators=(",", ":")) for r in first.records()) == sorted(
        bodies
    )
    assert {r["receive_count"] for r in first.records()} == {1}
    assert {r["receive_count"] for r in second.records()} == {2}
    # WHEN redriven: back on the job queue, gone from the DLQ
    queue_before = int(
        sqs.get_queue_attributes(
            QueueUrl=live.resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
    )
    moved = cli("dlq", "redrive", "--json")
    assert moved.code == 0, moved.err
    assert moved.record()["moved"] == 2
    attrs = sqs.get_queue_attributes(
        QueueUrl=live.resources.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    received = sqs.receive_message(QueueUrl=live.resources.queue_url, MaxNumberOfMessages=10)
    assert sorted(m["Body"] for m in received.get("Messages", [])) == sorted(bodies)
    assert queue_before == 0
    for m in received.get("Messages", []):
        sqs.delete_message(QueueUrl=live.resources.queue_url, ReceiptHandle=m["ReceiptHandle"])


# -- configuration errors on a live stack ----------------------------------------------------


def test_api_key_read_from_secrets_manager(
    live: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY")
    result = cli("webhooks", "list", "--json")  # GEONODE_API_KEY_SECRET_ID is set
    assert result.code == 0, result.err
    assert len(result.records()) >= 3
    assert API_KEY not in result.out


def test_api_key_secret_id_flag_beats_the_key_variable(
    live: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a wrong key in the environment and the right one's secret named by the flag
    assert live.resources is not None
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", "stale-key-in-env")
    # WHEN a command runs THEN the flag wins: the key is read from the secret
    result = cli("--api-key-secret-id", live.resources.api_key_secret_arn, "webhooks", "list")
    assert result.code == 0, result.err


def test_missing_api_key_is_one_line_exit_2(
    live: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY")
    monkeypatch.delenv("GEONODE_API_KEY_SECRET_ID")
    assert_one_error_line(cli("webhooks", "list"), 2, "no API key")


def test_wrong_api_key_is_one_line_exit_1_without_the_key(live: LocalStack, cli: Cli):
    result = cli("--api-key", "wrong-key-123456", "webhooks", "list")
    line = assert_one_error_line(result, 1, "401")
    assert "wrong-key-123456" not in line


def test_status_without_aws_resources_is_exit_2(
    live: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("LEDGER_TABLE_NAME")
    monkeypatch.delenv("QUEUE_URL")
    assert_one_error_line(cli("status"), 2, "LEDGER_TABLE_NAME", "QUEUE_URL")


def test_rotate_secret_without_resources_stops_before_rotating(
    live: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    hook = live.webhook_ids["crawl_completed"]
    rotations = _sub(live, hook).rotations
    monkeypatch.delenv("LEDGER_TABLE_NAME")
    result = cli("webhooks", "rotate-secret", hook)  # WEBHOOK_SECRET_ID from the environment
    assert_one_error_line(result, 2, "LEDGER_TABLE_NAME")
    assert _sub(live, hook).rotations == rotations
