"""The failure table's rows (docs/failures.md), reproduced on the local stack and recovered.

Each test breaks one thing, runs the pipeline on a manual clock, and checks from outside
(simulator truth, S3 object versions) that no job was lost and none was processed twice.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import boto3
import httpx
import pytest

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.jobs import JobKey, JobKind, JobState
from scrape_pipeline.ledger import Ledger
from scrape_pipeline.queue import JobMessage, JobQueue
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


def processor(stack: LocalStack) -> Any:
    return stack.handlers["processor"].get_processor()[0]


def receiver(stack: LocalStack) -> Any:
    return stack.handlers["receiver"].get_receiver()


# -- webhook never sent, dropped, or subscription disabled -----------------------------------


def test_failure_dropped_webhooks_recovered_from_job_list(make_stack: MakeStack):
    # GIVEN a sender that loses every event
    stack = make_stack()
    stack.sim.faults.update(drop_rate=1.0)
    submit(stack)
    # WHEN only the reconciler can notice
    stack.run_until(all_settled_and_done(stack, N), step=10.0, limit=3000)
    # THEN every job is stored once, and the gap is measured where it was found
    assert check_exactly_once(stack) == {"stored": N}
    assert stack.front is not None and stack.front.invocations == 0
    assert recovered(stack)["job_list"] == N


def test_failure_disabled_subscription_recovered_from_job_list(make_stack: MakeStack):
    stack = make_stack()
    client = stack.client()
    client.update_webhook(stack.webhook_ids["extract_completed"], is_active=False)
    submit(stack)
    stack.run_until(all_settled_and_done(stack, N), step=10.0, limit=3000)
    assert check_exactly_once(stack) == {"stored": N}
    assert recovered(stack)["job_list"] == N


# -- receiver answers non-2xx: sender retries; delivery log ---------------------------------


def test_failure_receiver_5xx_window_recovered_by_sender_retry(make_stack: MakeStack):
    stack = make_stack()
    real_send = receiver(stack)._queue.send
    outage = {"on": True}
    failed_sends: list[str] = []

    def send(message: JobMessage, **kwargs: Any) -> str:
        if outage["on"]:
            failed_sends.append(message.key.job_id)
            raise AWSUnavailableError("sqs", "SendMessage", "ServiceUnavailable")
        return str(real_send(message, **kwargs))

    receiver(stack)._queue.send = send
    ids = set(submit(stack))

    def every_job_attempted() -> bool:
        return {a["job_id"] for a in stack.sim.delivery_attempts()} >= ids

    stack.run_until(every_job_attempted, step=1.0, limit=60)
    stack.sim.drain(timeout=30)  # let attempts still in flight finish before looking
    # the receiver said 503 to every first attempt, and undid every row whose send failed
    assert all(a["http_status"] == 503 for a in stack.sim.delivery_attempts())
    left = ledger(stack).pending(JobState.RECEIVED, since_before=stack.clock.time() + 1)[0]
    assert failed_sends
    assert not {row.key.job_id for row in left} & set(failed_sends), left
    outage["on"] = False
    stack.run_until(all_settled_and_done(stack, N), step=5.0, limit=2400)
    assert check_exactly_once(stack) == {"stored": N}
    # the delivery log's failed attempts (or the sender's retries) did it, before the job
    # list's threshold; a put whose answer got lost on the way (moto under load) would leave
    # a row for the stale-row sweep, never for the job list
    found = recovered(stack)
    assert found["job_list"] == 0


def test_failure_401s_replayed_from_delivery_log(make_stack: MakeStack):
    # GIVEN a rotation done at the API while the stored secret stays old: every delivery 401s
    stack = make_stack()
    client = stack.client()
    client.rotate_webhook_secret(stack.webhook_ids["extract_completed"])
    submit(stack)
    stack.run_until(all_settled_and_done(stack, N), step=10.0, limit=3000)
    statuses = {a["http_status"] for a in stack.sim.delivery_attempts()}
    assert statuses == {401}
    assert check_exactly_once(stack) == {"stored": N}
    assert recovered(stack) == {"delivery_log": N, "job_list": 0, "stuck_rows": 0, "watch": 0}


# -- same delivery twice, or concurrently ---------------------------------------------------


def test_failure_duplicate_deliveries_stored_once(make_stack: MakeStack):
    stack = make_stack()
    stack.sim.faults.update(duplicate_rate=1.0)
    submit(stack)
    stack.run_until(all_settled_and_done(stack, N), step=1.0, limit=600)
    assert check_exactly_once(stack) == {"stored": N}
    assert stack.front is not None and stack.front.invocations == 2 * N


# -- crash after ledger put, before SQS send ------------------------------------------------


def test_failure_crash_between_put_and_send_recovered_as_stale_row(make_stack: MakeStack):
    stack = make_stack()
    real_send = receiver(stack)._queue.send
    crashes = {"left": N}

    def crash_once(message: JobMessage, **kwargs: Any) -> str:
        if crashes["left"] > 0:
            crashes["left"] -= 1
            raise RuntimeError("receiver killed between the put and the send")
        return str(real_send(message, **kwargs))

    receiver(stack)._queue.send = crash_once
    submit(stack)
    stack.run_until(all_settled_and_done(stack, N), step=10.0, limit=3000)
    assert check_exactly_once(stack) == {"stored": N}
    # the sender's retry found a fresh RECEIVED row (a duplicate); the stale-row sweep finished it
    found = recovered(stack)
    assert found["stuck_rows"] + found["job_list"] == N


# -- SQS send fails: 5xx, no orphan (covered with the 5xx window above); processor crash ----


def test_failure_processor_crash_after_store_before_done(make_stack: MakeStack):
    stack = make_stack()
    job_processor = processor(stack)
    real_finish = job_processor._ledger.finish
    crashed: list[str] = []

    def finish(key: JobKey, owner: str, outcome: Any, detail: Any = None, **kwargs: Any) -> Any:
        if key.job_id not in crashed:
            crashed.append(key.job_id)
            raise RuntimeError("processor killed after writing the result")
        return real_finish(key, owner, outcome, detail, **kwargs)

    job_processor._ledger.finish = finish
    submit(stack)
    stack.run_until(all_settled_and_done(stack, N), step=10.0, limit=3000)
    stack.run_until(lambda: _all_done(stack), step=10.0, limit=3000)
    assert len(crashed) == N
    assert check_exactly_once(stack) == {"stored": N}  # one version per object despite the retry


def _all_done(stack: LocalStack) -> bool:
    rows = ledger(stack).get_many([JobKey(JobKind.EXTRACT, j["job_id"]) for j in truth(stack)])
    return bool(rows) and all(r.is_done for r in rows.values())


# -- Geonode 429 / 5xx in the processor -----------------------------------------------------


def test_failure_geonode_429_storm_processor_waits_without_sleeping(make_stack: MakeStack):
    # No reconciler: its client may back off in place (it has no queue to wait on); this is
    # about the processor, which must not.
    stack = make_stack(StackSettings(reconcile_interval=10.0**9))
    submit(stack)
    stack.run_until(
        lambda: all(j["status"] == "completed" for j in truth(stack)), step=1.0, limit=60
    )
    stack.sim.faults.burst(duration_s=120.0, status=429)
    stack.run_until(all_settled_and_done(stack, N), step=5.0, limit=1200)
    assert check_exactly_once(stack) == {"stored": N}
    assert stack.clock.sleeps == []  # nobody slept: messages came back on SQS's clock


def test_failure_geonode_5xx_burst_recovered(make_stack: MakeStack):
    stack = make_stack()
    submit(stack)  # (a submission during the burst would rightly not be retried: 503 on a POST)
    stack.sim.faults.burst(duration_s=60.0, status=503)
    stack.run_until(all_settled_and_done(stack, N), step=5.0, limit=1800)
    assert check_exactly_once(stack) == {"stored": N}


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


# -- secret rotated --------------------------------------------------------------------------


def test_failure_secret_rotation_mid_run_loses_nothing(make_stack: MakeStack):
    from scrape_pipeline.reconciler import Reconciler
    from scrape_pipeline_ops.rotation import SecretBundle, rotate_webhook_secret

    stack = make_stack()
    submit(stack, N, "a")
    stack.step(5.0)
    assert stack.resources is not None
    reconciler: Reconciler = stack.handlers["reconciler"].get_reconciler()
    result = rotate_webhook_secret(
        stack.client(),
        stack.webhook_ids["extract_completed"],
        SecretBundle(stack.resources.webhook_secret_arn),
        grace_seconds=3600,
        replay_with=reconciler,
        clock=stack.clock,
    )
    submit(stack, N, "b")
    stack.run_until(all_settled_and_done(stack, 2 * N), step=1.0, limit=600)
    assert check_exactly_once(stack) == {"stored": 2 * N}
    assert result.secrets_kept == 1  # the extract subscription's previous secret, expiring
    assert 401 not in {a["http_status"] for a in stack.sim.delivery_attempts()}
    stored = json.loads(
        boto3.client("secretsmanager").get_secret_value(
            SecretId=stack.resources.webhook_secret_arn
        )["SecretString"]
    )["subscriptions"]
    assert {i: [s["expires_at"] is None for s in group] for i, group in stored.items()} == {
        stack.webhook_ids["extract_completed"]: [True, False],
        stack.webhook_ids["batch_completed"]: [True],
        stack.webhook_ids["crawl_completed"]: [True],
    }


@pytest.mark.parametrize("flat", [False, True], ids=["per-subscription", "old-flat-bundle"])
def test_failure_rotating_one_secret_keeps_the_other_subscriptions_verified(
    make_stack: MakeStack, flat: bool
):
    # GIVEN the extract subscription's secret rotated, and its grace over; with an old flat
    # bundle (the three secrets in one list, shared) in place of the per-subscription one
    from scrape_pipeline.signatures import WebhookSecret, WebhookSecrets
    from scrape_pipeline_ops.rotation import SecretBundle, rotate_webhook_secret

    stack = make_stack()
    assert stack.resources is not None
    if flat:
        subs = [stack.sim.subscriptions.find(i) for i in stack.webhook_ids.values()]
        stack.store_secrets(
            WebhookSecrets(shared=tuple(WebhookSecret(s.secret) for s in subs if s))
        )
    bundle = SecretBundle(stack.resources.webhook_secret_arn)
    rotate_webhook_secret(
        stack.client(),
        stack.webhook_ids["extract_completed"],
        bundle,
        grace_seconds=600,
        clock=stack.clock,
    )
    # (the next rotation of an old bundle writes it per subscription)
    assert not bundle.read().shared and set(bundle.read().subscriptions) == set(
        stack.webhook_ids.values()
    )
    stack.step(601.0)
    # WHEN every subscription delivers
    client = stack.client()
    submit(stack, 3, "r")
    batch_id = client.create_batch([f"https://example.com/rb{i}" for i in range(3)]).job_id
    crawl_id = client.create_crawl("https://example.com/rsite", max_pages=3).job_id

    def stored(kind: str, job_id: str) -> int:
        prefix = f"results/{kind}/{job_id}/"
        return sum(1 for k in versions(stack) if k.startswith(prefix) and "metadata" in k)

    stack.run_until(
        lambda: (
            all_settled_and_done(stack, 3)()
            and stored("batch", batch_id) == 3
            and stored("crawl", crawl_id) == 3
        ),
        step=5.0,
        limit=3600,
    )
    # THEN each one's deliveries were accepted (none refused 401), and nothing needed recovery
    attempts = stack.sim.delivery_attempts()
    answered = {(a["event_type"], a["http_status"]) for a in attempts}
    assert answered == {
        (e, 200) for e in ("extract_completed", "batch_completed", "crawl_completed")
    }
    assert check_exactly_once(stack) == {"stored": 3}
    assert max(versions(stack).values()) == 1
    assert recovered(stack).total() == 0


@pytest.mark.parametrize("scheme", ["standard_webhooks", "stripe", "github"])
def test_pipeline_other_signature_schemes(make_stack: MakeStack, scheme: str):
    stack = make_stack(StackSettings(signature_scheme=scheme))
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
