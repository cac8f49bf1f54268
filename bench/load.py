"""Load test: the receiver behind the local API front, next to moto's own ceiling.

python -m bench.load [--deliveries 5000] [--senders 20] [--duplicates 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from bench.aws_calls import take
from bench.report import fill, markdown_table, percentile, save
from scrape_pipeline_local.moto_server import forget_cached_clients

SECRET = "whsec_bG9hZC10ZXN0LXNlY3JldC1ub3QtcmVhbC1hdC1hbGw"
EVENTS = ("extract_completed", "batch_completed", "crawl_completed")
REGION = "us-east-1"
CEILING_TABLE = "load-ceiling-ledger"
CEILING_QUEUE = "load-ceiling-jobs"
FRONT_BACKLOG = 128  # the front's listen backlog; 0 keeps socketserver's 5
# No processor runs, so every row stays RECEIVED. With the default (120 s), a duplicate that
# arrives more than 120 s after its original takes the row for a crashed writer's and
# re-enqueues it (answered "accepted"; the processor's lease makes that harmless): a run
# longer than two minutes would count those. A processor keeping up moves rows on within
# seconds; this stands for it.
RESEND_AFTER_SECONDS = 86_400


# -- the deliveries --------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One signed webhook delivery, ready to send."""

    index: int
    pk: str  # the ledger key of its job: kind#job_id
    job_id: str
    kind: str
    delivery_id: str
    original: int | None  # index of the job's first delivery; None: this is the first
    racing: bool  # a duplicate placed next to its original: both in flight at once
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Plan:
    """Every delivery in sending order, and what the counts must come to."""

    deliveries: tuple[Delivery, ...]
    distinct: int
    duplicates: int
    racing: int

    @property
    def jobs(self) -> set[str]:
        return {d.pk for d in self.deliveries}


def make_plan(
    deliveries: int,
    duplicate_share: float,
    senders: int,
    *,
    seed: int = 7,
) -> Plan:
    """``deliveries`` signed deliveries, ``duplicate_share`` of them repeating an earlier job."""
    from scrape_pipeline.jobs import JobKey
    from scrape_pipeline.receiver.payload import EVENT_KINDS
    from scrape_pipeline.receiver.signatures.config import SignatureConfig
    from scrape_pipeline_ops.signing import sign

    if deliveries < 1 or senders < 1:
        raise ValueError("deliveries and senders must be at least 1")
    if not 0 <= duplicate_share < 1:
        raise ValueError("the duplicate share must be in [0, 1)")
    duplicates = round(deliveries * duplicate_share)
    distinct = deliveries - duplicates
    rng = random.Random(seed)
    racing = min(distinct, max(1, duplicates // 3)) if duplicates else 0
    # (slot, rank, tie-break, job number): job j's first delivery takes slot j, its racing
    # duplicate comes right behind it, later duplicates take a slot at least `gap` further.
    order: list[tuple[int, int, float, int]] = [(j, 0, 0.0, j) for j in range(distinct)]
    order += [(j, 1, 0.0, j) for j in rng.sample(range(distinct), racing)]
    gap = 2 * senders
    for _ in range(duplicates - racing):
        j = rng.randrange(distinct)
        order.append((j + gap + rng.randrange(max(distinct - j, 1)), 2, rng.random(), j))
    order.sort()
    config = SignatureConfig()
    now = time.time()
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    first: dict[int, int] = {}
    built: list[Delivery] = []
    for index, (_, rank, _, job) in enumerate(order):
        event = EVENTS[job % len(EVENTS)]
        job_id = f"load-{seed}-{job:06d}"
        delivery_id = f"dlv-{seed}-{index:06d}"
        envelope = {
            "event": event,
            "webhook_id": f"wh_{event}",
            "delivery_id": delivery_id,
            "timestamp": stamp,
            "data": {"job_id": job_id, "status": "completed"},
        }
        body = json.dumps(envelope, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Webhook-Delivery-Id": delivery_id,
            "X-Webhook-Event": event,
            **sign(config, body, SECRET, now),
        }
        kind = EVENT_KINDS[event]
        built.append(
            Delivery(
                index=index,
                pk=JobKey(kind, job_id).pk,
                job_id=job_id,
                kind=kind.value,
                delivery_id=delivery_id,
                original=first.get(job),
                racing=rank == 1,
                body=body,
                headers=headers,
            )
        )
        first.setdefault(job, index)
    return Plan(tuple(built), distinct=distinct, duplicates=duplicates, racing=racing)


# -- sending concurrently ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """What one delivery got back."""

    index: int
    status: int | None  # None: no answer at all (connection error, timeout, exception)
    answer: str  # the body's "status" ("accepted", "duplicate") or what went wrong
    started: float
    ended: float


Call = Callable[[Delivery], tuple[int | None, str]]


@dataclass(frozen=True)
class Phase:
    """One run of the plan through one set of calls."""

    sent: tuple[Sent, ...]
    wall_seconds: float


def run_concurrently(
    plan: Plan, calls: Sequence[Call], limit_seconds: float, drain: QueueDrain
) -> Phase:
    """Each call in its own thread takes the next delivery until none is left or time is up."""
    lock = threading.Lock()
    pending: Iterator[Delivery] = iter(plan.deliveries)
    start = threading.Barrier(len(calls) + 1)
    deadline = time.perf_counter() + limit_seconds
    outputs: list[list[Sent]] = [[] for _ in calls]

    def work(call: Call, out: list[Sent]) -> None:
        start.wait()
        while time.perf_counter() < deadline:
            drain.admit()
            with lock:
                delivery = next(pending, None)
            if delivery is None:
                return
            started = time.perf_counter()
            try:
                status, answer = call(delivery)
            except Exception as exc:  # noqa: BLE001 - a load test counts failures, it does not stop
                status, answer = None, f"{type(exc).__name__}: {exc}"[:120]
            out.append(Sent(delivery.index, status, answer, started, time.perf_counter()))
            if answer == "accepted":
                drain.announce()

    threads = [
        threading.Thread(target=work, args=(call, out), daemon=True)
        for call, out in zip(calls, outputs, strict=True)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.perf_counter()) + 60)
    sent = sorted((s for out in outputs for s in out), key=lambda s: s.index)
    if not sent:
        return Phase((), 0.0)
    wall = max(s.ended for s in sent) - min(s.started for s in sent)
    return Phase(tuple(sent), wall)


def http_call(client: Any, url: str) -> Call:
    """POST a delivery's exact bytes and headers to the front."""

    def call(delivery: Delivery) -> tuple[int | None, str]:
        response = client.post(url, content=delivery.body, headers=delivery.headers)
        try:
            document = response.json()
            answer = str(document.get("status") or document.get("error") or "")
        except (ValueError, AttributeError):
            answer = "not a JSON object"
        return response.status_code, answer

    return call


def raw_call(dynamodb: Any, sqs: Any, table: str, queue_url: str) -> Call:
    """The receiver's AWS calls without the receiver: its ledger's conditional PutItem
    (``Ledger.record``), then SendMessage if the row is new."""
    from scrape_pipeline.jobs import JobKey, Source
    from scrape_pipeline.ledger.full import Ledger
    from scrape_pipeline.processor.queue import JobMessage, JobQueue

    ledger = Ledger(table, client=dynamodb)
    queue = JobQueue(queue_url, client=sqs)

    def call(delivery: Delivery) -> tuple[int | None, str]:
        key = JobKey.from_pk(delivery.pk)
        event = f"{key.kind}_completed"
        recorded = ledger.record(key, source=Source.WEBHOOK, detail={"event": event})
        if not recorded.created:
            return 200, "duplicate"
        queue.send(JobMessage(key, Source.WEBHOOK))
        return 200, "accepted"

    return call


# -- the queue, kept shallow -------------------------------------------------------------------


class QueueDrain:
    """Receives and deletes a queue's messages in batches, counting jobs by ledger key."""

    BATCH = 10  # messages per receive and per batch delete
    HIGH_WATER = 40  # undrained messages past which senders wait
    IDLE_WAIT = 0.5  # seconds between receives when no batch is due
    ADMIT_TIMEOUT = 30.0  # longest a sender waits for the drain

    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self._state = threading.Condition()
        self._stopping = False
        self._announced = 0  # answers that say a message was sent ("accepted")
        self._received = 0
        self._thread: threading.Thread | None = None
        self.jobs: Counter[str] = Counter()
        self.errors: list[str] = []
        self.held_back = 0  # times a sender waited for the drain

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def announce(self) -> None:
        """A sender heard "accepted": one more message should be in the queue."""
        with self._state:
            self._announced += 1
            self._state.notify_all()

    def admit(self) -> None:
        """Wait (boundedly) while too many messages are undrained."""
        with self._state:
            if self._undrained() < self.HIGH_WATER:
                return
            self.held_back += 1
            self._state.wait_for(
                lambda: self._stopping or self._undrained() < self.HIGH_WATER,
                timeout=self.ADMIT_TIMEOUT,
            )

    def _undrained(self) -> int:
        return self._announced - self._received

    def _run(self) -> None:
        while True:
            with self._state:
                # A batch due, or the idle wait over: receive (strays are caught this way too).
                self._state.wait_for(
                    lambda: self._stopping or self._undrained() >= self.BATCH,
                    timeout=self.IDLE_WAIT,
                )
                if self._stopping:
                    return
            try:
                self.drain_once()
            except Exception as exc:  # noqa: BLE001 - reported with the counts
                self.errors.append(type(exc).__name__)
                with self._state:
                    self._state.wait(self.IDLE_WAIT)

    def drain_once(self) -> int:
        """One receive and one batch delete; returns how many messages there were."""
        from scrape_pipeline.processor.queue import read_message

        messages = take(self._sqs, self.queue_url, WaitTimeSeconds=0)
        with self._state:
            for message in messages:
                self.jobs[read_message(message["Body"]).key.pk] += 1
            self._received += len(messages)
            self._state.notify_all()
        return len(messages)

    def finish(self, limit_seconds: float = 120.0) -> int:
        """Stop the thread, take what is left; returns what the queue still holds (0)."""
        with self._state:
            self._stopping = True
            self._state.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=limit_seconds)
        deadline = time.perf_counter() + limit_seconds
        empty = 0
        while empty < 3 and time.perf_counter() < deadline:
            empty = 0 if self.drain_once() else empty + 1
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())


# -- the stack ---------------------------------------------------------------------------------


class LoadStack:
    """The local stack on the real clock, set up for the receiver alone."""

    def __init__(self, *, backlog: int = FRONT_BACKLOG) -> None:
        self.backlog = backlog
        self.stack: Any = None
        self.front: Any = None  # the API Gateway front on the receiver
        self.resources: Any = None  # what the stack created from the template
        self.handler: Any = None  # the receiver's handler module, functions/receiver/app.py
        self.url = ""  # where the webhooks go

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> Self:
        from scrape_pipeline.clock import SYSTEM_CLOCK
        from scrape_pipeline.receiver.signatures.secret import WebhookSecret, WebhookSecrets
        from scrape_pipeline_local.stack import LocalStack, StackSettings

        settings = StackSettings(
            signature_scheme="geonode",
            webhooks=False,
            env={"RESEND_AFTER_SECONDS": str(RESEND_AFTER_SECONDS)},
        )
        self.stack = LocalStack(SYSTEM_CLOCK, settings=settings)
        self.stack.start()
        self.stack.store_secrets(WebhookSecrets(shared=(WebhookSecret(SECRET),)))
        self.front, self.resources = self.stack.front, self.stack.resources
        self.handler = self.stack.handlers["receiver"]
        self.url = str(self.front.url("/webhooks/geonode"))
        forget_cached_clients()
        if self.backlog:
            # socketserver listens with a backlog of 5: a burst of new connections overflows
            # it (resets, 1 s SYN retransmits). API Gateway has no such limit; the invocations
            # stay one at a time.
            self.front._server.socket.listen(self.backlog)
        return self

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
            self.stack.handlers["receiver"].reset_receiver()
            self.stack = None
        forget_cached_clients()

    def client(self, service: str, *, config: Any = None) -> Any:
        """A boto3 client for the moto server."""
        import boto3

        session: Any = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
        )
        return session.client(service, endpoint_url=self.stack.moto.endpoint, config=config)

    def ledger_keys(self, table: str) -> list[str]:
        """Every job's ledger key in a table (a paginated scan)."""
        from scrape_pipeline_ops.ledger import Ledger

        return [key.pk for key in Ledger(table, client=self.client("dynamodb")).job_keys()]


# -- measuring and checking --------------------------------------------------------------------


@dataclass
class PhaseReport:
    """One phase's figures and the exact counts they must meet."""

    name: str
    planned: int
    distinct: int
    duplicates: int
    sent: int
    wall_seconds: float
    statuses: dict[str, int]
    answers: dict[str, int]
    server_errors: int
    ledger_rows: int
    enqueued: int
    enqueued_more_than_once: int
    queue_left: int
    drain_errors: list[str]
    senders_held_back: int  # times a sender waited for the drain (the queue ran deep)
    in_flight_with_original: int  # duplicates whose request overlapped their original's
    throughput: float
    p50_ms: float
    p99_ms: float
    problems: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "name"}


def report_phase(
    name: str,
    plan: Plan,
    phase: Phase,
    *,
    ledger_keys: list[str],
    drain: QueueDrain,
    queue_left: int,
) -> PhaseReport:
    """Tally a phase and list every count that is not exactly what the plan says."""
    sent = phase.sent
    statuses = Counter("none" if s.status is None else str(s.status) for s in sent)
    answers = Counter(s.answer for s in sent)
    server_errors = sum(1 for s in sent if s.status is not None and s.status >= 500)
    by_index = {s.index: s for s in sent}
    overlapping = 0
    accepted_per_job: Counter[str] = Counter()
    for delivery in plan.deliveries:
        got = by_index.get(delivery.index)
        if got is not None and got.answer == "accepted":
            accepted_per_job[delivery.pk] += 1
        if delivery.original is None or got is None:
            continue
        original = by_index.get(delivery.original)
        if original is not None and got.started < original.ended and original.started < got.ended:
            overlapping += 1
    latencies = [(s.ended - s.started) * 1000 for s in sent]
    expected_jobs = plan.jobs
    problems: list[str] = []
    if len(sent) != len(plan.deliveries):
        problems.append(f"sent {len(sent)} of {len(plan.deliveries)} before the time limit")
    if server_errors:
        problems.append(f"{server_errors} answers were 5xx")
    if statuses.get("200", 0) != len(sent):
        problems.append(f"not every answer was 200: {dict(statuses)}")
    if answers.get("accepted", 0) != plan.distinct:
        problems.append(f"accepted {answers.get('accepted', 0)} != {plan.distinct} distinct jobs")
    if answers.get("duplicate", 0) != plan.duplicates:
        problems.append(f"duplicate {answers.get('duplicate', 0)} != {plan.duplicates} duplicates")
    if set(accepted_per_job) != expected_jobs or set(accepted_per_job.values()) - {1}:
        problems.append("some job was not accepted exactly once")
    if len(ledger_keys) != plan.distinct or set(ledger_keys) != expected_jobs:
        problems.append(f"ledger rows {len(ledger_keys)} != {plan.distinct} distinct jobs")
    if set(drain.jobs) != expected_jobs or sum(drain.jobs.values()) != plan.distinct:
        problems.append(
            f"queue messages {sum(drain.jobs.values())} != {plan.distinct} distinct jobs "
            "(each exactly once)"
        )
    if queue_left:
        problems.append(f"{queue_left} messages left in the queue after draining")
    if drain.errors:
        problems.append(f"the drain failed {len(drain.errors)} times: {set(drain.errors)}")
    return PhaseReport(
        name=name,
        planned=len(plan.deliveries),
        distinct=plan.distinct,
        duplicates=plan.duplicates,
        sent=len(sent),
        wall_seconds=round(phase.wall_seconds, 3),
        statuses=dict(sorted(statuses.items())),
        answers=dict(sorted(answers.items())),
        server_errors=server_errors,
        ledger_rows=len(ledger_keys),
        enqueued=sum(drain.jobs.values()),
        enqueued_more_than_once=sum(1 for n in drain.jobs.values() if n > 1),
        queue_left=queue_left,
        drain_errors=sorted(set(drain.errors)),
        senders_held_back=drain.held_back,
        in_flight_with_original=overlapping,
        throughput=round(len(sent) / phase.wall_seconds, 1) if phase.wall_seconds else 0.0,
        p50_ms=round(percentile(latencies, 50), 2),
        p99_ms=round(percentile(latencies, 99), 2),
        problems=problems,
    )


@dataclass
class LoadResult:
    """The receiver's phase, the ceiling's (when measured) and how they compare."""

    deliveries: int
    senders: int
    duplicate_share: float
    racing_duplicates: int
    receiver: PhaseReport
    ceiling: PhaseReport | None
    front_invocations: int
    load_average: tuple[float, float]  # 1-minute, before and after: what else ran meanwhile
    front_backlog: int

    @property
    def ratio(self) -> float | None:
        """Receiver throughput as a share of moto's raw throughput for the same calls."""
        if self.ceiling is None or not self.ceiling.throughput:
            return None
        return round(self.receiver.throughput / self.ceiling.throughput, 3)

    @property
    def problems(self) -> list[str]:
        found = [f"receiver: {p}" for p in self.receiver.problems]
        if self.ceiling is not None:
            found += [f"moto ceiling: {p}" for p in self.ceiling.problems]
        return found

    def figures(self) -> dict[str, Any]:
        return {
            "deliveries": self.deliveries,
            "senders": self.senders,
            "duplicate_share": self.duplicate_share,
            "racing_duplicates": self.racing_duplicates,
            "front_invocations": self.front_invocations,
            "front_backlog": self.front_backlog,
            "load_average_1m": {"before": self.load_average[0], "after": self.load_average[1]},
            "receiver": self.receiver.figures(),
            "moto_ceiling": self.ceiling.figures() if self.ceiling else None,
            "ratio_to_ceiling": self.ratio,
            "note": self.note(),
            "problems": self.problems,
        }

    def note(self) -> str:
        """How to read the figures."""
        backlog = (
            f"its listen backlog is raised to {self.front_backlog} (socketserver's 5 resets a "
            "burst of new connections; API Gateway has no such limit)"
            if self.front_backlog > 5
            else "its listen backlog is socketserver's 5"
        )
        return fill("load_note", backlog=backlog)

    def table(self) -> str:
        r, c = self.receiver, self.ceiling
        ratio = f"{self.ratio:.2f}" if self.ratio is not None else "not measured"
        load = f"{self.load_average[0]:.1f} / {self.load_average[1]:.1f}"

        def pair(label: str, figure: Callable[[PhaseReport], Any]) -> list[Any]:
            return [label, figure(r), figure(c) if c is not None else "not measured"]

        rows: list[list[Any]] = [
            pair(
                "deliveries: distinct jobs + duplicates",
                lambda p: f"{p.planned}: {p.distinct} + {p.duplicates}",
            ),
            ["concurrent senders / threads", self.senders, self.senders],
            [
                "duplicates in flight with their original",
                f"{r.in_flight_with_original} ({self.racing_duplicates} sent alongside)",
                "",
            ],
            [
                "answers 200 / 5xx / no answer",
                f"{r.statuses.get('200', 0)} / {r.server_errors} / {r.statuses.get('none', 0)}",
                "",
            ],
            pair(
                "accepted / duplicate",
                lambda p: f"{p.answers.get('accepted', 0)} / {p.answers.get('duplicate', 0)}",
            ),
            pair(
                "ledger rows / job messages received", lambda p: f"{p.ledger_rows} / {p.enqueued}"
            ),
            pair("counts", lambda p: "exact" if not p.problems else "; ".join(p.problems)),
            pair("senders held back for the drain (times)", lambda p: p.senders_held_back),
            pair("throughput (deliveries/s)", lambda p: p.throughput),
            pair("latency per delivery p50 / p99 (ms)", lambda p: f"{p.p50_ms} / {p.p99_ms}"),
            ["throughput: receiver / moto alone", ratio, ""],
            ["machine load, 1-min average before / after", load, ""],
        ]
        headers = "load|receiver behind the API front|moto alone (same calls, boto3)"
        return markdown_table(headers, rows)


def receiver_phase(stack: LoadStack, plan: Plan, senders: int, limit_seconds: float) -> PhaseReport:
    """The plan over HTTP through the front to the real handler, one httpx client per sender."""
    import httpx

    from bench.receiver import quiet

    assert stack.resources is not None and stack.handler is not None and stack.front is not None
    drain = QueueDrain(stack.client("sqs"), stack.resources.queue_url).start()
    clients = [httpx.Client(timeout=30.0) for _ in range(senders)]
    try:
        with quiet(stack.handler.logger):  # CloudWatch's job in Lambda; here, a sink
            phase = run_concurrently(
                plan, [http_call(c, stack.url) for c in clients], limit_seconds, drain
            )
    finally:
        for client in clients:
            client.close()
    left = drain.finish()
    keys = stack.ledger_keys(stack.resources.table)
    return report_phase("receiver", plan, phase, ledger_keys=keys, drain=drain, queue_left=left)


def ceiling_phase(
    stack: LoadStack, plan: Plan, threads: int, limit_seconds: float, name: str = CEILING_TABLE
) -> PhaseReport:
    """The same AWS calls with boto3, straight at moto, from ``threads`` threads: no receiver."""
    from botocore.config import Config

    from scrape_pipeline_local.create import create_ledger_table, create_queues

    create_ledger_table(stack.client("dynamodb"), name)
    queue_url, _ = create_queues(stack.client("sqs"), name)
    # botocore clients are thread-safe: one of each, with a connection per thread.
    pool = Config(max_pool_connections=threads)
    dynamodb, sqs = stack.client("dynamodb", config=pool), stack.client("sqs", config=pool)
    dynamodb.describe_table(TableName=name)  # first-call costs, untimed
    sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    calls = [raw_call(dynamodb, sqs, name, queue_url)] * threads
    drain = QueueDrain(stack.client("sqs"), queue_url).start()
    phase = run_concurrently(plan, calls, limit_seconds, drain)
    left = drain.finish()
    keys = stack.ledger_keys(name)
    return report_phase("moto ceiling", plan, phase, ledger_keys=keys, drain=drain, queue_left=left)


def warm_up(stack: LoadStack) -> None:
    """Pay the one-time costs outside the measured windows, and write nothing they count."""
    import httpx

    from bench.receiver import quiet

    assert stack.handler is not None
    with quiet(stack.handler.logger):
        forged = httpx.post(
            stack.url,
            content=b'{"event":"extract_completed","data":{"job_id":"warm-up"}}',
            headers={"X-Webhook-Signature": "0" * 64},
            timeout=30,
        )
    if forged.status_code != 401:
        raise RuntimeError(f"a forged delivery got {forged.status_code}, not 401")
    scratch = make_plan(40, 0.25, 1, seed=0)
    report = ceiling_phase(stack, scratch, 1, 60.0, name="load-warm-up")
    if report.problems:
        raise RuntimeError(f"moto failed the warm-up: {report.problems}")


def run_load(
    deliveries: int = 5000,
    senders: int = 20,
    duplicate_share: float = 0.3,
    *,
    seed: int = 7,
    ceiling: bool = True,
    limit_seconds: float = 600.0,
    backlog: int = FRONT_BACKLOG,
) -> LoadResult:
    """Start the stack, send the plan through the front, then (optionally) measure moto alone."""
    plan = make_plan(deliveries, duplicate_share, senders, seed=seed)
    load_before = os.getloadavg()
    with LoadStack(backlog=backlog) as stack:
        assert stack.front is not None
        warm_up(stack)
        invocations_before = stack.front.invocations
        receiver = receiver_phase(stack, plan, senders, limit_seconds)
        invocations = stack.front.invocations - invocations_before
        moto_alone = ceiling_phase(stack, plan, senders, limit_seconds) if ceiling else None
    return LoadResult(
        deliveries=len(plan.deliveries),
        senders=senders,
        duplicate_share=duplicate_share,
        racing_duplicates=plan.racing,
        receiver=receiver,
        ceiling=moto_alone,
        front_invocations=invocations,
        load_average=(load_before[0], os.getloadavg()[0]),
        front_backlog=backlog or 5,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=5000)
    parser.add_argument("--senders", type=int, default=20)
    parser.add_argument("--duplicates", type=float, default=0.3, help="share of duplicates")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--limit-seconds", type=float, default=600.0, help="per phase")
    parser.add_argument(
        "--front-backlog", type=int, default=FRONT_BACKLOG, help="0 keeps socketserver's 5"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Bench")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "receiver")

    result = run_load(
        args.deliveries,
        args.senders,
        args.duplicates,
        seed=args.seed,
        limit_seconds=args.limit_seconds,
        backlog=args.front_backlog,
    )
    table = result.table()
    print(table)
    print()
    print(result.note())
    if result.ceiling is not None and result.ratio is not None:
        print(
            f"receiver {result.receiver.throughput} deliveries/s, moto alone "
            f"{result.ceiling.throughput} deliveries/s: ratio {result.ratio:.2f}"
        )
    for problem in result.problems:
        print("PROBLEM:", problem)
    save(
        "load",
        result.figures(),
        f"{table}\n\n_{result.note()}_",
        load_start=[round(result.load_average[0], 2)],
    )
    return 1 if result.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
