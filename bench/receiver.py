"""Receiver benchmark: handler overhead without AWS time, AWS calls per delivery, cold import.

python -m bench.receiver [--deliveries 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from bench.aws_calls import take
from bench.report import fill, load_average, percentile, save
from scrape_pipeline_local.lambda_runtime import LambdaContext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "whsec_YmVuY2htYXJrLXNlY3JldC1ub3QtcmVhbA"
context = partial(LambdaContext, "receiver", request_id="bench")  # what Powertools reads
TARGETS = {"p99_overhead_ms": 1.0, "calls_new": 2, "calls_duplicate": 1, "import_ratio": 1.6}


class CallMeter:
    """Counts and times whole AWS calls (botocore's serialization, signing, parsing included)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.seconds = 0.0

    def reset(self) -> None:
        self.calls.clear()
        self.seconds = 0.0

    def wrap(self, client: Any) -> Any:
        meter = self

        class Timed:
            def __getattr__(self, name: str) -> Any:
                method = getattr(client, name)
                if not callable(method):
                    return method

                def timed(*args: Any, **kwargs: Any) -> Any:
                    meter.calls.append(name)
                    started = time.perf_counter()
                    try:
                        return method(*args, **kwargs)
                    finally:
                        meter.seconds += time.perf_counter() - started

                return timed

        return Timed()


@contextlib.contextmanager
def quiet(logger: Any) -> Iterator[None]:
    """Send the handler's log and metric lines to a sink (CloudWatch's job in Lambda)."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        previous = logger.registered_handler.setStream(sink)
        try:
            yield
        finally:
            logger.registered_handler.setStream(previous)


def signed_event(job_id: str, delivery: str) -> dict[str, Any]:
    """A signed ``extract_completed`` delivery as API Gateway hands it to the handler."""
    from scrape_pipeline.receiver.signatures.config import SignatureConfig
    from scrape_pipeline_ops.signing import sign
    from tests.support.events import api_gateway_event

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # refused without one
    data = {"job_id": job_id}
    envelope = {"event": "extract_completed", "delivery_id": delivery, "timestamp": stamp}
    body = json.dumps({**envelope, "data": data}).encode()
    headers = {"Content-Type": "application/json", "X-Webhook-Delivery-Id": delivery}
    return api_gateway_event(
        body, {**headers, **sign(SignatureConfig(), body, SECRET, time.time())}
    )


def run_handler(deliveries: int) -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from tests.support.template import create_ledger_table, create_queues, create_secret

    meter = CallMeter()
    with mock_aws():
        create_ledger_table(boto3.client("dynamodb"), "ledger")
        queue_url, _ = create_queues(boto3.client("sqs"), "jobs")
        arn = create_secret(
            boto3.client("secretsmanager"),
            "hooks",
            json.dumps({"secrets": [{"value": SECRET, "expires_at": None}]}),
        )
        os.environ.update(
            {"LEDGER_TABLE_NAME": "ledger", "QUEUE_URL": queue_url, "WEBHOOK_SECRET_ID": arn}
        )
        sys.path.insert(0, os.path.join(ROOT, "functions", "receiver"))
        import app  # the handler, exactly as Lambda loads it

        app.reset_receiver()
        receiver = app.get_receiver()
        receiver.ledger.client = meter.wrap(receiver.ledger.client)
        receiver.queue._sqs = meter.wrap(receiver.queue._sqs)

        sqs = boto3.client("sqs")
        new_events = [signed_event(f"job-{i}", f"d-{i}") for i in range(deliveries)]
        dup_events = [signed_event(f"job-{i}", f"d-{i}-retry") for i in range(deliveries)]
        with quiet(app.logger):
            app.lambda_handler(signed_event("warm", "w"), context())  # caches the secret
        overhead: dict[str, list[float]] = {"new": [], "duplicate": []}
        calls: dict[str, list[int]] = {"new": [], "duplicate": []}
        statuses: dict[str, list[int]] = {"new": [], "duplicate": []}
        with quiet(app.logger):
            for label, events in (("new", new_events), ("duplicate", dup_events)):
                for ev in events:
                    meter.reset()
                    started = time.perf_counter()
                    response = app.lambda_handler(ev, context())
                    total = time.perf_counter() - started
                    overhead[label].append((total - meter.seconds) * 1000)
                    calls[label].append(len(meter.calls))
                    statuses[label].append(response["statusCode"])
                    if label == "new":
                        # keep moto's queue shallow: its cost grows with depth (field-notes)
                        take(sqs, queue_url)
    assert set(statuses["new"]) == {200} and set(statuses["duplicate"]) == {200}
    both = overhead["new"] + overhead["duplicate"]
    return {
        "deliveries": deliveries,
        "overhead_ms": {
            "p50": round(percentile(both, 50), 3),
            "p99": round(percentile(both, 99), 3),
            "new_p99": round(percentile(overhead["new"], 99), 3),
            "duplicate_p99": round(percentile(overhead["duplicate"], 99), 3),
        },
        "aws_calls": {
            "new": max(calls["new"]),
            "duplicate": max(calls["duplicate"]),
            "new_mean": statistics.mean(calls["new"]),
        },
    }


class InstantDynamoDB:
    """Answers PutItem as DynamoDB does, at once: new keys pass, known keys fail the condition."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        item = kwargs["Item"]
        old = self.items.get(item["pk"]["S"])
        if old is not None:
            error = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "x"}}
            raise ClientError({**error, "Item": old}, "PutItem")  # type: ignore[typeddict-item]
        self.items[item["pk"]["S"]] = item
        return {}


class InstantSQS:
    """Answers SendMessage at once."""

    def send_message(self, **_: Any) -> dict[str, Any]:
        return {"MessageId": "00000000-0000-0000-0000-000000000000"}


def run_without_aws(deliveries: int) -> dict[str, Any]:
    """The handler's own time: AWS answered instantly in memory, so nothing else is measured."""
    sys.path.insert(0, os.path.join(ROOT, "functions", "receiver"))
    import app

    from scrape_pipeline.ledger.full import Ledger
    from scrape_pipeline.processor.queue import JobQueue
    from scrape_pipeline.receiver.secret_store import SecretStore
    from scrape_pipeline.receiver.webhook import Receiver, ReceiverSettings

    bundle = json.dumps({"secrets": [{"value": SECRET, "expires_at": None}]})
    settings = ReceiverSettings(table_name="ledger", queue_url="queue", secret_id="hooks")
    receiver = Receiver(
        settings,
        ledger=Ledger("ledger", client=InstantDynamoDB()),  # type: ignore[arg-type]
        queue=JobQueue("queue", client=InstantSQS()),  # type: ignore[arg-type]
        secrets=SecretStore("hooks", fetch=lambda *_: bundle),
    )
    app.build_receiver = lambda: receiver
    app.get_receiver()  # built once (and gc.freeze()), as after a cold start

    events = [
        signed_event(f"j{i}", f"d{i}{attempt}")
        for i in range(deliveries)
        for attempt in ("", "-retry")
    ]
    timings: list[float] = []
    with quiet(app.logger):
        for ev in events:
            started = time.perf_counter()
            response = app.lambda_handler(ev, context())
            timings.append((time.perf_counter() - started) * 1000)
            assert response["statusCode"] == 200, response
    return {
        "deliveries": len(events),
        "p50": round(percentile(timings, 50), 3),
        "p90": round(percentile(timings, 90), 3),
        "p99": round(percentile(timings, 99), 3),
    }


def cold_import(repeats: int) -> dict[str, Any]:
    """Median wall time of fresh interpreters importing boto3, the handler, and building it."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compare with byte code cached on both sides
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "functions", "receiver"), os.path.join(ROOT, "layers", "shared")]
    )
    env |= {"POWERTOOLS_METRICS_NAMESPACE": "Bench", "POWERTOOLS_SERVICE_NAME": "receiver"}
    env |= {"AWS_DEFAULT_REGION": "us-east-1", "LEDGER_TABLE_NAME": "t", "WEBHOOK_SECRET_ID": "s"}
    env["QUEUE_URL"] = "https://sqs.us-east-1.amazonaws.com/1/q"
    programs = {
        "boto3": "import boto3",
        "receiver": "import app",
        "receiver_and_clients": "import app; app.get_receiver()",
    }
    timings: dict[str, list[float]] = {k: [] for k in programs}
    for _ in range(2):  # warm the byte-code caches
        for code in programs.values():
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
    for _ in range(repeats):
        for name, code in programs.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            timings[name].append((time.perf_counter() - started) * 1000)
    medians = {k: round(statistics.median(v), 1) for k, v in timings.items()}
    medians["ratio"] = round(medians["receiver"] / medians["boto3"], 2)
    medians["ratio_with_clients"] = round(medians["receiver_and_clients"] / medians["boto3"], 2)
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--import-repeats", type=int, default=15)
    args = parser.parse_args(argv)
    load_start = load_average()
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Bench")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "receiver")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "bench")

    # The handler's own time first, in a heap that moto has not filled with garbage.
    own = run_without_aws(args.deliveries)
    handler = run_handler(args.deliveries)
    imports = cold_import(args.import_repeats)
    ok = {
        "p99_overhead": own["p99"] <= TARGETS["p99_overhead_ms"],
        "calls_new": handler["aws_calls"]["new"] <= TARGETS["calls_new"],
        "calls_duplicate": handler["aws_calls"]["duplicate"] <= TARGETS["calls_duplicate"],
        "import_ratio": imports["ratio"] <= TARGETS["import_ratio"],
    }
    table = fill("receiver", own=own, moto=handler, imports=imports, targets=TARGETS)
    print(table)
    print("targets met:", ok)
    save(
        "receiver",
        {
            "handler_moto": handler,
            "handler_own_ms": own,
            "cold_import_ms": imports,
            "targets_met": ok,
        },
        table,
        load_start=load_start,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
