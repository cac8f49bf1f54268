"""The failure table's rows (docs/failures.md) that no chaos scenario proves, on the local stack.

The faults the chaos matrix injects (drops, duplicates, outages, crashes, 429/5xx, rotations)
are proven there once; each test here breaks one thing the matrix does not, judged from outside.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
import httpx

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import (
    MakeStack,
    all_settled_and_done,
    check_exactly_once,
    dlq_depth,
    truth,
    versions,
)
from tests.pipeline.direct import NO_RECONCILER

N = 12


def submit(stack: LocalStack, n: int = N, prefix: str = "f") -> list[str]:
    client = stack.client()
    return [client.submit_extract(f"https://example.com/{prefix}{i}").job_id for i in range(n)]


def recovered(stack: LocalStack) -> Counter[str]:
    """JobsRecovered by source, summed over the reconciler runs so far."""
    assert stack.schedule is not None
    total: Counter[str] = Counter()
    for run in stack.schedule.runs:
        total.update(run["recovered"])
    return total


def ledger(stack: LocalStack) -> Ledger:
    assert stack.resources is not None
    return Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)


# -- event arrives before the job settled ----------------------------------------------------


def test_failure_event_before_job_settled_retried_later(make_stack: MakeStack):
    stack = make_stack(job_duration_min_s=60, job_duration_max_s=90)
    ids = submit(stack, 5)
    assert stack.resources is not None
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    for job_id in ids:  # an early, out-of-order notification for each job
        queue.send(JobMessage(JobKey(JobKind.EXTRACT, job_id), "test"))
    stack.step(1.0)
    assert versions(stack) == Counter()  # nothing stored from a job that is not done
    stack.run_until(all_settled_and_done(stack, 5), step=5.0, limit=1200)
    assert check_exactly_once(stack) == {"stored": 5}


# -- poison message ---------------------------------------------------------------------------


def test_failure_poison_message_reaches_dlq(make_stack: MakeStack):
    stack = make_stack()
    assert stack.resources is not None
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=stack.resources.queue_url, MessageBody="{not a job")
    # five receives, 360 s apart (the visibility timeout), then the redrive on the sixth
    stack.run_until(lambda: dlq_depth(stack) == 1, step=60.0, limit=7 * 360)
    [message] = sqs.receive_message(QueueUrl=stack.resources.dlq_url)["Messages"]
    assert message["Body"] == "{not a job"


def test_pipeline_other_signature_schemes(make_stack: MakeStack):
    # One scheme other than Geonode's proves the stack passes its scheme to the sender and the
    # receiver alike; each scheme's signing (tests/simulator/test_sim_deliveries.py) and its
    # verifying (tests/unit/test_signatures.py, published vectors) are pinned on their own.
    stack = make_stack(StackSettings(signature_scheme="standard_webhooks"))
    submit(stack, 4)
    stack.run_until(all_settled_and_done(stack, 4), step=1.0, limit=300)
    assert check_exactly_once(stack) == {"stored": 4}
    assert recovered(stack).total() == 0


# -- a captured delivery replayed ------------------------------------------------------------

# The documented defaults: a 36-hour freshness window; a job reopened at most three times.
REPLAY_WINDOW = 36 * 3600
MAX_REOPENS = 3
GET_EXTRACT = "GET /v1/extract/{job_id}"


def capture(stack: LocalStack) -> list[tuple[bytes, dict[str, str]]]:
    """Every request the simulator sends its subscribers from now on, bytes and headers, as a
    proxy log along the way would keep them."""
    seen: list[tuple[bytes, dict[str, str]]] = []

    def keep(request: httpx.Request) -> None:
        seen.append((request.content, dict(request.headers)))

    stack.sim.webhooks._client = httpx.Client(
        trust_env=False, follow_redirects=False, event_hooks={"request": [keep]}
    )
    return seen


def replay(stack: LocalStack, body: bytes, headers: dict[str, str]) -> int:
    """POST a captured delivery to the stack's public endpoint, as anyone on the internet can."""
    assert stack.front is not None
    sent = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "host")}
    return httpx.post(stack.front.url("/webhooks/geonode"), content=body, headers=sent).status_code


def gets(stack: LocalStack, job_id: str) -> int:
    """The simulator's count of GETs of one extract job."""
    return int(stack.sim.request_counts()["by_job"].get(job_id, {}).get(GET_EXTRACT, 0))


def queued(stack: LocalStack) -> int:
    """Messages in the job queue, visible or in flight (SQS's approximation)."""
    assert stack.resources is not None
    attrs = boto3.client("sqs").get_queue_attributes(
        QueueUrl=stack.resources.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attrs.values())


def test_failure_captured_delivery_replayed_after_the_window_is_refused(make_stack: MakeStack):
    # GIVEN jobs stored from their webhooks, whose deliveries someone captured on the way
    stack = make_stack(StackSettings(reconcile_interval=NO_RECONCILER))
    captured = capture(stack)
    ids = submit(stack, 3, prefix="cap")
    stack.run_until(all_settled_and_done(stack, 3), step=1.0, limit=600)
    assert check_exactly_once(stack) == {"stored": 3} and len(captured) == 3
    before = {j: gets(stack, j) for j in ids}
    # WHEN the window has passed and the rows are gone (as the TTL removes them), and every
    # capture is replayed
    stack.clock.advance(REPLAY_WINDOW + 60)
    for job_id in ids:
        ledger(stack).client.delete_item(
            TableName=ledger(stack).table_name, Key={"pk": {"S": f"extract#{job_id}"}}
        )
    statuses = [replay(stack, body, headers) for body, headers in captured]
    for _ in range(30):
        stack.step(10.0)
    # THEN each is refused, and nothing happened: no row, no message, no GET, no second write
    assert statuses == [401, 401, 401]
    assert ledger(stack).get_many([JobKey(JobKind.EXTRACT, j) for j in ids]) == {}
    assert queued(stack) == 0
    assert {j: gets(stack, j) for j in ids} == before
    assert max(versions(stack).values()) == 1


def forged_by_sender(
    stack: LocalStack, job_id: str, delivery_id: str
) -> tuple[bytes, dict[str, str]]:
    """A delivery of ``job_id``'s event signed with its subscription's real secret, as the
    sender makes one (each attempt has a delivery id of its own)."""
    from scrape_pipeline_local.simulator.subscriptions import Event
    from scrape_pipeline_local.simulator.webhooks import build_request

    sub = stack.sim.subscriptions.find(stack.webhook_ids["extract_completed"])
    assert sub is not None
    now = stack.clock.time()
    event = Event(f"evt-{job_id}", "extract_completed", sub.account, job_id, sub.id, now)
    data: dict[str, object] = {"job_id": job_id, "status": "completed"}
    return build_request(
        stack.sim_config, sub=sub, event=event, delivery_id=delivery_id, now=now, data=data
    )


def test_failure_fresh_replays_of_a_closed_job_make_bounded_work(make_stack: MakeStack):
    # GIVEN a job the API answers 404 for, closed as "unknown job" (three 404s, no reconciler)
    stack = make_stack(
        StackSettings(env={"NOT_FOUND_MAX_TRIES": "3"}, reconcile_interval=NO_RECONCILER),
        job_duration_min_s=10.0**6,
        job_duration_max_s=10.0**6,
        not_found_lag_s=10.0**7,
    )
    (job_id,) = submit(stack, 1, prefix="gone")
    assert stack.resources is not None
    JobQueue(stack.resources.queue_url, client=boto3.client("sqs")).send(
        JobMessage(JobKey(JobKind.EXTRACT, job_id), "early")
    )
    dead = f"dead-letters/extract/{job_id}.json"
    stack.run_until(lambda: versions(stack)[dead] == 1, step=5.0, limit=600)
    per_close = gets(stack, job_id)
    assert per_close >= 3

    def deliver(body: bytes, headers: dict[str, str]) -> int:
        status = replay(stack, body, headers)
        for _ in range(60):  # long enough for the processor to close it again
            stack.step(10.0)
        return status

    # WHEN one signed delivery is replayed five times, then five more each with an id of its own
    same = forged_by_sender(stack, job_id, "dlv-captured")
    first = [deliver(*same) for _ in range(5)]
    after_same = gets(stack, job_id)
    fresh = [deliver(*forged_by_sender(stack, job_id, f"dlv-{n}")) for n in range(5)]

    # THEN every replay is answered 2xx (a duplicate is not an error), the same delivery made
    # work once, and the job came back at most MAX_REOPENS times in all: the simulator's GETs
    # say so (3 a close: 12 in all, where five replays of one delivery made 18 before)
    print(
        f"replays: GETs per close {per_close}, after one delivery x5 {after_same}, after five"
        f" more {gets(stack, job_id)}; dead-letter versions {versions(stack)[dead]}"
    )
    assert set(first + fresh) == {200}
    assert after_same <= 2 * per_close, (per_close, after_same)
    assert gets(stack, job_id) <= (1 + MAX_REOPENS) * per_close, (per_close, gets(stack, job_id))
    assert versions(stack)[dead] <= 1 + MAX_REOPENS
    assert queued(stack) == 0


def test_failure_senders_last_retry_a_day_later_still_verifies(make_stack: MakeStack):
    # GIVEN a sender that stamps the event's time on every retry (the contract does not say
    # which), at the far end of its jitter, and a receiver down for its first seven attempts
    from scrape_pipeline_local.simulator.config import DEFAULT_RETRY_SCHEDULE_S

    stack = make_stack(
        StackSettings(reconcile_interval=NO_RECONCILER),
        webhook_retry_schedule_s=tuple(s * 1.2 for s in DEFAULT_RETRY_SCHEDULE_S),
        webhook_timestamp="event",
    )
    assert stack.front is not None
    stack.front.failing_with = 503
    (job_id,) = submit(stack, 1, prefix="late")

    def attempts() -> list[dict[str, Any]]:
        return [a for a in stack.sim.delivery_attempts() if a["job_id"] == job_id]

    stack.run_until(lambda: len(attempts()) == 7, step=600.0, limit=40 * 3600)
    stack.front.failing_with = None
    # WHEN the eighth and last attempt comes, a day and more after the event
    stack.run_until(all_settled_and_done(stack, 1), step=600.0, limit=20 * 3600)
    # THEN it verified, and the job is stored once
    last = attempts()[-1]
    assert last["attempt_number"] == 8 and last["http_status"] == 200
    settled = truth(stack)[0]["settled_at"]
    assert float(last["delivered_at"]) - settled > 33 * 3600
    assert check_exactly_once(stack) == {"stored": 1}
