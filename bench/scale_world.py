"""The scale benchmark's world: the local stack, the real reconciler, counted AWS sessions, and
stand-ins for the receiver and processor at rates moto cannot carry end to end."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3

from bench.aws_calls import AwsCalls, event_source_on
from scrape_pipeline.jobs import JobKey, JobState, Outcome, Source
from scrape_pipeline.ledger.attributes import Attr
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import read_message
from scrape_pipeline.reconciler.report import ReconcileReport
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline.wiring.reconciler import build_reconciler
from scrape_pipeline_local.resolve import references
from scrape_pipeline_local.settings import local_settings, schedule_seconds
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.sqs_poller import SqsEventSource
from scrape_pipeline_local.stack import API_KEY, LocalStack, StackSettings
from scrape_pipeline_local.translate import FUNCTION, resources_of_type, translate

# The stack's own schedule: later than any run of the benchmark, so it never fires.
NEVER_SECONDS = 10.0**9
SCHEDULED_RULE = "AWS::Events::Rule"
# How long the event source waits when the queue was empty, during a reconciler run.
CONSUME_IDLE_SECONDS = 0.05
COUNTED = ("reconciler", "pipeline", "event_source")  # whose AWS calls a point counts


@dataclass(frozen=True)
class TemplateReconciler:
    """The reconciler as ``template.yaml`` deploys it, parameters at their defaults."""

    logical_id: str
    schedule: str  # the rule's ScheduleExpression
    interval: float  # that expression in seconds
    timeout: float  # the function's Timeout: the wall time a run may take
    env: dict[str, str]  # its environment variables that do not name a resource

    @classmethod
    def read(cls, schedule: str | None = None) -> TemplateReconciler:
        """The template's reconciler; ``schedule`` replaces the rule's expression (previews)."""
        translation = translate()
        wiring = local_settings(translation)
        functions = resources_of_type(translation, FUNCTION)
        rules = [
            rule["Properties"]
            for rule in resources_of_type(translation, SCHEDULED_RULE).values()
            if "ScheduleExpression" in rule["Properties"]
        ]
        (logical_id,) = set.union(*(references(r.get("Targets")) for r in rules)) & set(functions)
        expression = schedule or wiring["reconcile_schedule"]
        return cls(
            logical_id=logical_id,
            schedule=expression,
            interval=schedule_seconds(expression),
            timeout=float(wiring["reconciler_timeout"]),
            env=dict(wiring["function_env"][logical_id]),
        )


@dataclass
class World:
    """One point's stack, reconciler, event source and ledger views."""

    stack: LocalStack
    reconciler: Reconciler
    template: TemplateReconciler
    # AWS calls by who made them, each through a session of its own: the reconciler, the
    # pipeline (receiver and processor, or their stand-ins) and the event source (SQS polls).
    counted: dict[str, AwsCalls]
    poller: SqsEventSource
    pipeline_ledger: Ledger  # counted: the stand-ins write through it
    probe_ledger: Ledger  # uncounted: the benchmark's own reads

    def run_reconciler(self, *, consume: bool) -> tuple[ReconcileReport, float]:
        """One run with the wall time a Lambda of the template's Timeout has; (report, seconds)."""
        started = time.monotonic()
        deadline = started + self.template.timeout

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        # Lambda's event source takes messages off the queue while the run fills it, as in
        # AWS; left to pile up, moto's SQS slows down with depth (every call scans the queue).
        stop = threading.Event()

        def work_queue() -> None:
            while not stop.is_set():
                if self.poller.poll_once() == 0:
                    stop.wait(CONSUME_IDLE_SECONDS)

        consumer = threading.Thread(target=work_queue, name="scale-event-source", daemon=True)
        if consume:
            consumer.start()
        try:
            report = self.reconciler.run(remaining)
        finally:
            stop.set()
            if consume:
                consumer.join()
        return report, time.monotonic() - started

    def geonode_requests(self) -> Counter[str]:
        """The simulator's own count of API requests, by route."""
        return Counter(self.stack.sim.request_counts()["by_route"])

    def stop(self) -> None:
        self.stack.stop()


def sim_config(seed: int) -> SimConfig:
    """Every job completes (no resubmissions), no rate limit (the manual clock runs in bursts)."""
    return SimConfig(
        seed=seed,
        rate_limit_per_s=0,
        retryable_failure_rate=0.0,
        permanent_failure_rate=0.0,
    )


def start_world(
    clock: Any,
    template: TemplateReconciler,
    *,
    seed: int,
    webhooks: bool,
    overrides: Mapping[str, str] | None = None,
    processor: Callable[[dict[str, Any], Any], Any] | None = None,
) -> World:
    """Start the stack; build the reconciler and the pipeline's clients on counted sessions."""
    stack = LocalStack(
        clock,
        sim_config(seed),
        StackSettings(reconcile_interval=NEVER_SECONDS, webhooks=webhooks),
    ).start()
    try:
        assert stack.resources is not None
        env_of_function = local_settings(translate(), stack.resources)["function_env"]
        # The template's variables at their defaults, except where the local stack stands in
        # for a deployed resource: its endpoints and the names of what it created.
        assert stack.simulator is not None
        local = {
            **stack.resources.environment(),
            "GEONODE_BASE_URL": stack.simulator.base_url,
            "SIGNATURE_SCHEME": stack.settings.signature_scheme,
        }
        env = {
            **os.environ,
            **env_of_function[template.logical_id],
            **local,
            **(overrides or {}),
        }
        sessions = {name: boto3.session.Session() for name in (*COUNTED, "probe")}
        counted = {name: AwsCalls(sessions[name]) for name in COUNTED}
        # build_reconciler makes its clients from boto3's default session, at build time.
        boto3.DEFAULT_SESSION = sessions["reconciler"]
        reconciler = build_reconciler(env, clock=clock)
        # The handlers build theirs lazily, at their first invocation: the pipeline's session.
        boto3.DEFAULT_SESSION = sessions["pipeline"]
        poller = event_source_on(stack, sessions["event_source"].client("sqs"), processor)
        table = stack.resources.table
        return World(
            stack=stack,
            reconciler=reconciler,
            template=template,
            counted=counted,
            poller=poller,
            pipeline_ledger=Ledger(
                table, client=sessions["pipeline"].client("dynamodb"), clock=clock
            ),
            probe_ledger=Ledger(table, client=sessions["probe"].client("dynamodb"), clock=clock),
        )
    except BaseException:
        stack.stop()
        raise


__all__ = ["API_KEY", "TemplateReconciler", "World", "start_world"]


BATCH_WRITE_MAX = 25  # DynamoDB's limit of items per BatchWriteItem


def done_item(key: JobKey, now: float, *, source: str, ttl_seconds: int) -> dict[str, Any]:
    """The row of a job stored at ``now``: what the receiver's put and the processor's lease
    and finish leave behind (``Ledger.record``, ``acquire``, ``finish``)."""
    number = {"N": repr(now)}
    return {
        Attr.PK: {"S": key.pk},
        "kind": {"S": key.kind.value},
        "job_id": {"S": key.job_id},
        "state": {"S": JobState.DONE.value},
        Attr.STATE_SINCE: number,
        "created_at": number,
        "updated_at": number,
        "finished_at": number,
        Attr.EXPIRES_AT: {"N": str(int(now) + ttl_seconds)},
        "source": {"S": source},
        "token": {"S": uuid.uuid4().hex},
        "attempts": {"N": "1"},
        "strikes": {"N": "0"},
        "outcome": {"S": Outcome.STORED.value},
        "detail": {"M": {}},
    }


def store(ledger: Ledger, keys: Sequence[JobKey], *, source: str) -> None:
    """Write ``keys`` as stored now, 25 rows a call."""
    now = ledger.clock.time()
    items = [done_item(key, now, source=source, ttl_seconds=ledger.ttl_seconds) for key in keys]
    for start in range(0, len(items), BATCH_WRITE_MAX):
        request = {
            ledger.table_name: [
                {"PutRequest": {"Item": item}} for item in items[start : start + BATCH_WRITE_MAX]
            ]
        }
        while request:
            response = ledger.client.batch_write_item(RequestItems=request)  # type: ignore[arg-type]
            request = response.get("UnprocessedItems") or {}  # type: ignore[assignment]


def receive(ledger: Ledger, keys: Sequence[JobKey]) -> None:
    """Webhooks that arrived: each job recorded by the receiver and stored by the processor."""
    store(ledger, keys, source=Source.WEBHOOK)


def processor(ledger: Ledger) -> Any:
    """A processor handler that stores every job of its SQS batch."""

    def handle(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        messages = [read_message(record["body"]) for record in event["Records"]]
        by_source: dict[str, list[JobKey]] = {}
        for message in messages:
            by_source.setdefault(message.source, []).append(message.key)
        for source, keys in by_source.items():
            store(ledger, keys, source=source)
        return {"batchItemFailures": []}

    return handle
