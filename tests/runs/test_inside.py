"""One message of the submitter function, built by its wiring (``build_inside``) on real boto3
clients against a moto server and on a client of the simulator over HTTP: S3's event and the
function's own continuation in, rounds and queue messages out. Judged by the simulator's
record of POSTs per URL and by the queue, never by the journal's word."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline.runs.inside import Inside, Next
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import RunMode
from scrape_pipeline.runs.request import BadRequestError, Continue, Start, requests_of, spec_of
from scrape_pipeline.wiring.submitter import build_inside
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.geonode_admin import AdminClient
from tests.integration.test_client_simulator import KEY, start
from tests.support.events import sqs_event
from tests.support.template import create_ledger_table, moto_server

_NAMES = itertools.count()
PLENTY = lambda: 900.0  # noqa: E731 - an invocation's remaining seconds, far from the margin


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server, endpoint = moto_server()
    yield endpoint
    server.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sim(clock: ManualClock) -> Iterator[SimulatorServer]:
    server = start(clock, balance_tokens=None)
    yield server
    server.stop()


@pytest.fixture
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A ledger table, a bucket and a submissions queue of their own."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    n = next(_NAMES)
    table, bucket = f"ledger-{n}", f"bucket-{n}"
    create_ledger_table(boto3.client("dynamodb"), table)
    boto3.client("s3").create_bucket(Bucket=bucket)
    queue = boto3.client("sqs").create_queue(QueueName=f"submissions-{n}")["QueueUrl"]
    return {"table": table, "bucket": bucket, "queue": queue}


def _inside(aws: dict[str, str], sim: SimulatorServer, clock: ManualClock, **env: str) -> Inside:
    return build_inside(
        {
            "LEDGER_TABLE_NAME": aws["table"],
            "SUBMISSIONS_QUEUE_URL": aws["queue"],
            "GEONODE_SCRAPER_API_KEY": KEY,
            "GEONODE_BASE_URL": sim.base_url,
            **env,
        },
        clock=clock,
    )


def _upload(aws: dict[str, str], run: str, urls: list[str], options: Any = None) -> str:
    """The run's files in the bucket; the body of S3's notification of the .txt."""
    s3 = boto3.client("s3")
    if options is not None:
        s3.put_object(Bucket=aws["bucket"], Key=f"submissions/{run}.json", Body=json.dumps(options))
    s3.put_object(Bucket=aws["bucket"], Key=f"submissions/{run}.txt", Body="\n".join(urls))
    record = {
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": aws["bucket"]}, "object": {"key": f"submissions/{run}.txt"}},
    }
    return json.dumps({"Records": [record]})


def _messages(aws: dict[str, str]) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs")
    found = sqs.receive_message(
        QueueUrl=aws["queue"], MaxNumberOfMessages=10, WaitTimeSeconds=0
    ).get("Messages", [])
    for message in found:
        sqs.delete_message(QueueUrl=aws["queue"], ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(m["Body"]) for m in found]


def _posted(sim: SimulatorServer, urls: list[str]) -> dict[str, int]:
    every = sim.sim.submissions()
    return {url: every.get(url, 0) for url in urls}


def test_a_run_cut_near_the_deadline_is_continued_from_its_message(aws, sim, clock):
    # GIVEN a run of 12 URLs whose first invocation has time for 5 claims
    inside = _inside(aws, sim, clock)
    urls = [f"https://example.com/cut/{i}" for i in range(12)]

    def left() -> float:  # the invocation's time is up once five are posted
        return 900.0 if sum(_posted(sim, urls).values()) < 5 else 1.0

    # WHEN S3's event (as the event source delivers it) is handled
    body = sqs_event([_upload(aws, "cut", urls)])["Records"][0]["body"]
    [first] = inside.handle(body, left)
    # THEN five are posted and the run is handed on in a continuation message
    assert first.next is Next.CONTINUED and first.delay_s == 0
    assert sum(_posted(sim, urls).values()) == 5
    [message] = _messages(aws)
    assert message == {"continue": "cut", "idle": 0}
    # AND the continuation posts the rest, each URL once, and sends nothing more
    [second] = inside.handle(json.dumps(message), PLENTY)
    assert second.next is Next.DONE
    assert _posted(sim, urls) == {url: 1 for url in urls}
    assert _messages(aws) == []


def test_a_batch_run_takes_its_options_file_and_announces_each_batch(aws, sim, clock):
    # GIVEN 25 URLs and an options file: batches of 10, links and markdown
    inside = _inside(aws, sim, clock)
    urls = [f"https://example.com/opt/{i}" for i in range(25)]
    options = {"mode": "batch", "batch_size": 10, "formats": ["links", "markdown"]}
    # WHEN the upload is handled
    [done] = inside.handle(_upload(aws, "opt", urls, options), PLENTY)
    # THEN three batches were posted, each URL once, with the formats asked
    assert done.next is Next.DONE and done.report is not None
    assert done.report.run.mode is RunMode.BATCH and done.report.run.entries == 3
    assert _posted(sim, urls) == {url: 1 for url in urls}
    items = [j for j in sim.sim.truth_jobs("batch_item") if j["url"] in set(urls)]
    assert {tuple(j["formats"]) for j in items} == {("links", "markdown")}
    # AND each batch is in the ledger to be watched
    db = boto3.client("dynamodb")
    for batch_id in {j["job_id"] for j in items}:
        row = db.get_item(TableName=aws["table"], Key={"pk": {"S": f"batch#{batch_id}"}})
        assert row.get("Item"), batch_id


def _invocation(clock: ManualClock, seconds: float):
    """An invocation's ``remaining_s`` on the manual clock: ``seconds`` from now."""
    end = clock.time() + seconds
    return lambda: end - clock.time()


def test_a_retry_after_longer_than_the_time_left_is_waited_out_by_the_queue(aws, clock):
    # GIVEN an API that allows one POST per 50 s after a burst of 2, and an invocation with
    # 100 s left (60 s of them the margin)
    server = start(clock, rate_limit_per_s=0.02, rate_limit_burst=2)
    try:
        inside = _inside(aws, server, clock)
        urls = [f"https://example.com/paused/{i}" for i in range(4)]
        started = clock.time()
        # WHEN the upload is handled
        [done] = inside.handle(_upload(aws, "paused", urls), _invocation(clock, 100.0))
        # THEN the invocation never waited past its margin: two posted, the 429's 50 s pause
        # handed to the queue as the continuation's delay
        assert clock.time() - started <= 40.0
        assert done.next is Next.CONTINUED and 45 <= done.delay_s <= 50
        assert sum(_posted(server, urls).values()) == 2
        # AND once the pause is over the continuation posts the rest, each URL once
        clock.advance(float(done.delay_s))
        for _ in range(4):  # each continuation posts what the limit allows
            [then] = inside.handle(json.dumps({"continue": "paused"}), PLENTY)
            if then.next is Next.DONE:
                break
            clock.advance(float(then.delay_s))
        assert then.next is Next.DONE
        assert _posted(server, urls) == {url: 1 for url in urls}
    finally:
        server.stop()


def test_a_lookup_that_cannot_wait_for_the_job_list_is_left_to_the_next_invocation(aws, sim, clock):
    # GIVEN an extract run whose second POST's answer is lost after the API created the job,
    # in an invocation with 80 s left (20 s after the margin: less than the 30 s listing delay)
    inside = _inside(aws, sim, clock)
    urls = [f"https://example.com/late/{i}" for i in range(3)]
    sim.sim.faults.lose_answers("POST /v1/extract", ["timeout"])
    started = clock.time()
    # WHEN the upload is handled
    [done] = inside.handle(_upload(aws, "late", urls), _invocation(clock, 80.0))
    # THEN the invocation did not sleep out the listing delay: the entry in doubt is handed on
    assert clock.time() - started <= 20.0
    assert done.next is Next.CONTINUED and done.report is not None
    assert len(done.report.where(EntryState.IN_DOUBT)) == 1
    # AND the invocation once the job list covers its POST looks it up and adopts it: each
    # URL was posted once
    clock.advance(float(done.delay_s))
    [after] = inside.handle(json.dumps({"continue": "late"}), PLENTY)
    assert after.next is Next.DONE
    assert _posted(sim, urls) == {url: 1 for url in urls}


def test_an_entry_another_invocation_holds_is_continued_after_its_lease(aws, sim, clock):
    # GIVEN a planned run, one entry claimed by a killed invocation 10 s ago (lease 90 s)
    inside = _inside(aws, sim, clock)
    urls = [f"https://example.com/held/{i}" for i in range(3)]
    body = _upload(aws, "held", urls)
    planned = inside._submitter(inside.journal).plan(spec_of("\n".join(urls), None), "held")
    [entry, *_] = inside.journal.entries(planned.run.name)
    inside.journal.claim(entry, "killed-invocation", clock.time())
    clock.advance(10.0)
    # WHEN the run is handled
    [done] = inside.handle(body, PLENTY)
    # THEN the others are posted, the held one is not, and no time is spent waiting for it:
    # a continuation is sent for when its lease has run out
    assert _posted(sim, urls) == {urls[0]: 0, urls[1]: 1, urls[2]: 1}
    assert done.next is Next.CONTINUED and 80 <= done.delay_s <= 81
    assert sum(clock.sleeps) < 1.0  # the pace's spacing of sends, never the 80 s lease
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=aws["queue"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert _messages(aws) == []  # delayed: not visible yet
    # AND once the lease has run out the entry is in doubt until the job list covers its
    # claim; then the continuation looks it up (no job: posted once)
    clock.advance(100.0)
    [waiting] = inside.handle(json.dumps({"continue": "held", "idle": 0}), PLENTY)
    assert waiting.next is Next.CONTINUED and "catch up" in waiting.reason
    assert _posted(sim, urls)[urls[0]] == 0
    clock.advance(float(waiting.delay_s))
    [after] = inside.handle(json.dumps({"continue": "held", "idle": 0}), PLENTY)
    assert after.next is Next.DONE
    assert _posted(sim, urls) == {url: 1 for url in urls}


def test_a_run_the_api_refuses_stops_with_the_rest_planned(aws, clock):
    # GIVEN an account whose balance covers two URLs
    server = start(clock, balance_tokens=2)
    try:
        inside = _inside(aws, server, clock)
        urls = [f"https://example.com/broke/{i}" for i in range(5)]
        # WHEN the run is handled
        [done] = inside.handle(_upload(aws, "broke", urls), PLENTY)
        # THEN it stops (402) with three left planned, and no continuation loops on it
        assert done.next is Next.STOPPED and "402" in done.reason
        assert done.report is not None and len(done.report.where(EntryState.PLANNED)) == 3
        assert sum(_posted(server, urls).values()) == 2
        assert _messages(aws) == []
    finally:
        server.stop()


def test_a_batch_whose_answer_was_lost_is_adopted_once_the_delivery_log_names_it(aws, sim, clock):
    # GIVEN an account subscribed to batch_completed (nobody listens: each attempt is logged)
    # and a batch run whose first POST's answer is lost after the API created the batch
    inside = _inside(aws, sim, clock)
    with AdminClient(KEY, base_url=sim.base_url, clock=clock) as client:
        client.create_webhook("http://127.0.0.1:9/hook", "batch_completed")
    urls = [f"https://example.com/lost/{i}" for i in range(4)]
    sim.sim.faults.lose_answers("POST /v1/batch", [502])
    # WHEN the run is handled
    [done] = inside.handle(_upload(aws, "lost", urls, {"mode": "batch", "batch_size": 2}), PLENTY)
    # THEN the batch in doubt is not posted again: the run is looked at again later
    assert done.next is Next.CONTINUED and "awaiting evidence" in done.reason
    assert done.delay_s == 900
    assert _messages(aws) == []  # delayed
    # AND once the batch has settled (its delivery logged), the continuation adopts it
    clock.advance(3600)
    sim.sim.pump()
    [after] = inside.handle(json.dumps({"continue": "lost", "idle": 0}), PLENTY)
    assert after.next is Next.DONE and after.report is not None and after.report.complete
    assert _posted(sim, urls) == {url: 1 for url in urls}


def test_a_batch_in_doubt_no_evidence_names_is_left_to_the_operator_after_idle_rounds(
    aws, sim, clock
):
    # GIVEN a lost batch answer on an account with no batch subscription, one idle round allowed
    inside = _inside(aws, sim, clock, SUBMITTER_MAX_IDLE_ROUNDS="1")
    urls = [f"https://example.com/unnamed/{i}" for i in range(2)]
    sim.sim.faults.lose_answers("POST /v1/batch", [502])
    [done] = inside.handle(_upload(aws, "unnamed", urls, {"mode": "batch"}), PLENTY)
    assert done.next is Next.CONTINUED
    # WHEN the continuations find no evidence, round after round
    rounds = [
        inside.handle(json.dumps({"continue": "unnamed", "idle": i}), PLENTY)[0] for i in (1, 2)
    ]
    # THEN it is stopped for the operator, never posted again
    assert rounds[-1].next is Next.STOPPED and "left for the operator" in rounds[-1].reason
    assert _posted(sim, urls) == {url: 1 for url in urls}


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"txt": "https://example.com/a\nftp://example.com/b"}, "not an http(s) URL"),
        ({"txt": "https://example.com/a", "json": '{"mode": "sync"}'}, "mode is one of"),
        ({"txt": "https://example.com/a", "json": '{"batch_size": 5}'}, "applies to mode batch"),
        ({"txt": "https://example.com/a", "json": '{"colour": "red"}'}, "unknown options"),
        ({"txt": "# only a comment"}, "at least one URL"),
    ],
)
def test_a_bad_run_file_is_dropped_with_its_reason_and_nothing_posted(aws, sim, clock, files, why):
    inside = _inside(aws, sim, clock)
    s3 = boto3.client("s3")
    run = f"bad-{next(_NAMES)}"
    if "json" in files:
        s3.put_object(Bucket=aws["bucket"], Key=f"submissions/{run}.json", Body=files["json"])
    body = _upload(aws, run, files["txt"].split("\n"))
    [done] = inside.handle(body, PLENTY)
    assert done.next is Next.DROPPED and why in done.reason
    assert sim.sim.submissions() == {}


def test_a_run_name_reused_for_other_urls_is_dropped(aws, sim, clock):
    inside = _inside(aws, sim, clock)
    [first] = inside.handle(_upload(aws, "same", ["https://example.com/one"]), PLENTY)
    [second] = inside.handle(_upload(aws, "same", ["https://example.com/two"]), PLENTY)
    assert first.next is Next.DONE
    assert second.next is Next.DROPPED and "planned from other URLs" in second.reason
    assert _posted(sim, ["https://example.com/two"]) == {"https://example.com/two": 0}


def test_messages_read_as_the_requests_they_hold():
    s3_event = {
        "Records": [{"s3": {"bucket": {"name": "b"}, "object": {"key": "submissions/a+b.txt"}}}]
    }
    with pytest.raises(BadRequestError, match="a run name"):
        requests_of(json.dumps(s3_event))  # S3 encodes a space as "+": "a b" names no run
    s3_event["Records"][0]["s3"]["object"]["key"] = "submissions/night%2E1.txt"
    assert requests_of(json.dumps(s3_event)) == [Start("b", "night.1")]
    assert requests_of('{"Service": "Amazon S3", "Event": "s3:TestEvent"}') == []
    assert requests_of('{"continue": "night.1", "idle": 2}') == [Continue("night.1", 2)]
    with pytest.raises(BadRequestError, match="not a run file"):
        requests_of(
            json.dumps({"Records": [{"s3": {"bucket": {"name": "b"}, "object": {"key": "x.txt"}}}]})
        )


def test_a_file_submitted_like_the_cli_is_the_cli_s_run():
    # The options take the CLI's shape: the same URLs and options give the same fingerprint.
    from scrape_pipeline.runs.plan import RunSpec

    spec = spec_of("https://example.com/a\nhttps://example.com/a\n", '{"formats": "html,links"}')
    cli = RunSpec.of(
        ["https://example.com/a"], RunMode.ASYNC, {"formats": ["html", "links"], "render_js": False}
    )
    assert spec.fingerprint() == cli.fingerprint()
    assert spec.urls == ("https://example.com/a",)


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (["--mode", "async"], None),
        (["--mode", "batch", "--batch-size", "500", "--formats", "markdown,html"],
         {"mode": "batch", "batch_size": 500, "formats": ["markdown", "html"]}),
        (["--mode", "crawl", "--max-pages", "3", "--render-js"],
         {"mode": "crawl", "max_pages": 3, "render_js": True}),
    ],
)  # fmt: skip
def test_a_file_submitted_from_the_cli_and_uploaded_is_the_same_run(
    argv: list[str], options: dict[str, Any] | None, tmp_path: Any
):
    # GIVEN one URL list, submitted by the CLI's flags or uploaded with an options file
    from scrape_pipeline_ops.cli.main import build_parser
    from scrape_pipeline_ops.cli.submit import parse_formats, read_urls
    from scrape_pipeline_ops.cli.submit_run import _spec

    text = "https://example.com/same/1\n# a comment\n\nhttps://example.com/same/2\n"
    path = tmp_path / "urls.txt"
    path.write_text(text)
    args = build_parser().parse_args(["submit", str(path), *argv])
    # WHEN each side makes its run of it
    cli = _spec(args, read_urls(args.file), parse_formats(args.formats))
    uploaded = spec_of(text, None if options is None else json.dumps(options))
    # THEN both are one run: the same derived name, so neither posts what the other did
    assert cli.derived_name() == uploaded.derived_name()
