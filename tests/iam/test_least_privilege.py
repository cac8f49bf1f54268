"""Least privilege, proven by execution: every AWS call the functions and the CLI make is
allowed by their IAM policy, and every action a policy allows is used or justified.

One local stack (recording which function made each call, ``scrape_pipeline_local.aws_calls``)
runs the failure table's faults that reach a different AWS call: duplicates, drops, a receiver
whose SQS send fails, a crash between the put and the send, a processor crash after the store,
a 429 storm, a poison message into the DLQ, a long-running job closed as unknown and reopened,
batches and crawls, a secret rotation with its 401s replayed. Then the operator CLI's AWS
commands run on it (``events tail`` too, until an event comes through its rule and queue).
Each call is evaluated against its function's role in the translated template (resolved to
the stack's ARNs), the CLI's against the operator policy of docs/security.md.

``IAM_REPORT=bench/results/iam.json`` saves the report (calls per function, unused actions).
"""

from __future__ import annotations

import contextvars
import io
import json
import os
import re
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.events.detail import SOURCE
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline_local.aws_calls import Call, CallRecorder, acting_as
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.create import StackResources
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import API_KEY, LocalStack, StackSettings
from scrape_pipeline_local.translate import (
    ACCOUNT_ID,
    BUCKET,
    REGION,
    ROOT,
    resources_of_type,
    template,
    translate,
)
from scrape_pipeline_ops.cli.config import STACK_OUTPUTS
from scrape_pipeline_ops.cli.main import main
from scrape_pipeline_ops.events_tail import TAIL_PREFIX
from tests.pipeline.conftest import QUIET, dlq_depth
from tests.support import iam

OPERATOR = "operator"
STACK_NAME = "scrape-pipeline"
PAGE = ROOT / "docs" / "security.md"
POLICY_BLOCK = re.compile(r"<!-- operator-iam-policy -->\s*```json\n(.*?)```", re.DOTALL)
# Template metadata naming the allowed actions no test uses, each with why it stays.
JUSTIFIED_KEY = "IamJustified"
# The submissions scenario's async run (see ``_submissions``).
ASYNC_URLS = 60

# The first test records every scenario on the local stack (its module fixture), about 30 s
# on an idle 2-core machine; a busy one can take several times that, past the suite's 120 s.
pytestmark = pytest.mark.timeout(300)


@dataclass
class Recorded:
    """One stack's scenarios: its resources (the ARNs the roles resolve to) and the calls."""

    name: str
    resources: StackResources
    calls: dict[Call, int]
    unattributed: dict[str, int]
    ambiguous: dict[str, int]


def _submit(stack: LocalStack, n: int, prefix: str) -> list[str]:
    client = stack.client()
    return [client.submit_extract(f"https://example.com/{prefix}{i}").job_id for i in range(n)]


def _settled(stack: LocalStack) -> bool:
    return all(j["status"] not in ("queued", "processing") for j in stack.sim.truth_jobs("extract"))


def _cold_start(stack: LocalStack, name: str) -> Any:
    """Build a function's container as its first invocation would, under its own name: one
    process per function in Lambda, so no cache (Powertools' secrets) carried from another."""
    from aws_lambda_powertools.utilities import parameters

    parameters.clear_caches()
    getter = {
        "receiver": "get_receiver",
        "processor": "get_processor",
        "submitter": "get_inside",
    }.get(name, "get_reconciler")
    with acting_as(name):
        return getattr(stack.handlers[name], getter)()


def _faults(stack: LocalStack) -> None:
    """Duplicates, a failed and a crashed SQS send, a processor crash after the store, drops,
    a 429 storm, a poison message redriven to the DLQ."""
    receiver = _cold_start(stack, "receiver")
    processor = _cold_start(stack, "processor")[0]
    _cold_start(stack, "reconciler")
    stack.sim.faults.update(duplicate_rate=1.0)
    _submit(stack, 3, "dup")
    stack.run_until(lambda: _settled(stack), step=5.0, limit=600)
    stack.sim.faults.update(duplicate_rate=0.0)
    # the receiver's SQS send fails once (its row forgotten, 503), then crashes once
    real_send = receiver.queue.send
    faults = ["unavailable", "crash"]

    def send(message: JobMessage, **kwargs: Any) -> str:
        if faults:
            if faults.pop(0) == "unavailable":
                raise AWSUnavailableError("sqs", "SendMessage", "ServiceUnavailable")
            raise RuntimeError("receiver killed between the put and the send")
        return str(real_send(message, **kwargs))

    receiver.queue.send = send
    real_finish = processor._ledger.finish
    crashed: list[str] = []

    def finish(key: Any, owner: str, outcome: Any, detail: Any = None, **kwargs: Any) -> Any:
        if not crashed:
            crashed.append(key.job_id)
            raise RuntimeError("processor killed after writing the result")
        return real_finish(key, owner, outcome, detail, **kwargs)

    processor._ledger.finish = finish
    _submit(stack, 3, "crash")
    stack.sim.faults.update(drop_rate=1.0)
    _submit(stack, 3, "drop")
    # long enough that a retry nears the redrive limit: the processor re-sends a delayed copy
    stack.sim.faults.burst(duration_s=1800.0, status=429)
    stack.run_until(lambda: _settled(stack), step=10.0, limit=3000)
    stack.sim.faults.update(drop_rate=0.0)
    for _ in range(60):
        stack.step(30.0)
    assert stack.resources is not None
    boto3.client("sqs").send_message(QueueUrl=stack.resources.queue_url, MessageBody="{not a job")
    stack.run_until(lambda: dlq_depth(stack) > 0, step=60.0, limit=7 * 360)
    # a row stuck RECEIVED that only the scheduled stuck-rows sweep can find
    enable = _stuck_row(stack)
    stack.step(1.0)
    enable()


def _stuck_row(stack: LocalStack) -> Callable[[], Any]:
    """A job whose SQS send crashed after its row was put, its webhooks then disabled so no
    retry finds the row; returns what enables them again."""
    receiver = stack.handlers["receiver"].get_receiver()
    real_send = receiver.queue.send

    def crash(message: JobMessage, **kwargs: Any) -> str:
        receiver.queue.send = real_send
        raise RuntimeError("receiver killed between the put and the send")

    receiver.queue.send = crash
    stack.sim.faults.update(duplicate_rate=0.0, drop_rate=0.0)
    client = stack.client()
    hooks = list(stack.webhook_ids.values())
    _submit(stack, 1, "stuck")
    stack.clock.advance(30.0)
    stack.settle_now()  # the delivery: the put, then the crash
    for hook in hooks:
        client.update_webhook(hook, is_active=False)
    stack.clock.advance(1200.0)  # past StaleAfterSeconds, no scheduled run meanwhile
    return lambda: [client.update_webhook(hook, is_active=True) for hook in hooks]


def _long_tail(stack: LocalStack) -> None:
    """Jobs looked at before the API knows them (dead-lettered as unknown, reopened when they
    settle), jobs parked WATCHING, retryable failures resubmitted, a batch and a crawl."""
    for name in ("receiver", "processor", "reconciler"):
        _cold_start(stack, name)
    client = stack.client()
    ids = _submit(stack, 3, "lag")
    assert stack.resources is not None
    queue = JobQueue(stack.resources.queue_url, client=boto3.client("sqs"))
    for job_id in ids:
        queue.send(JobMessage(JobKey(JobKind.EXTRACT, job_id), "early"))
    client.create_batch([f"https://example.com/b{i}" for i in range(12)])
    client.create_crawl("https://example.com/site", max_pages=12)
    stack.sim.faults.update(drop_rate=0.5)
    for _ in range(200):
        stack.step(15.0)


def _submissions(stack: LocalStack) -> None:
    """Runs uploaded to the bucket: a batch run with its options file, an async run handed from
    invocation to invocation (one killed mid-POST, its entry looked up), a bad run file."""
    _cold_start(stack, "submitter")
    assert stack.resources is not None
    s3 = boto3.client("s3")
    bucket = stack.resources.bucket
    stack.settle_now()  # S3's test event
    s3.put_object(
        Bucket=bucket, Key="submissions/b.json", Body=b'{"mode": "batch", "batch_size": 5}'
    )
    s3.put_object(Bucket=bucket, Key="submissions/b.txt", Body=_urls("batch", 20))
    stack.sim.faults.lose_answers("POST /v1/extract", ["timeout"])
    # Enough URLs that the async run is handed on (SendMessage) after its killed invocation:
    # twice on an idle machine at 100, 1.2 s of claims each. Each URL makes the same calls, so
    # more proves nothing; and each invocation rereads the run: on a busy machine 200 took 80
    # invocations (110 s), 100 took 40 s of CPU, 60 took 11 s.
    s3.put_object(Bucket=bucket, Key="submissions/a.txt", Body=_urls("async", ASYNC_URLS))
    s3.put_object(Bucket=bucket, Key="submissions/bad.txt", Body=b"not a url\n")
    wanted = [f"https://example.com/{p}/{i}" for p in ("batch", "async") for i in range(20)]
    # 40 steps on an idle machine; a loaded one does less in each 1.2 s invocation, so the run
    # takes more of them (the step count proves nothing here: the calls are what is recorded).
    for _ in range(150):
        stack.step(60.0)
        posted = stack.sim.submissions()
        if all(url in posted for url in wanted):
            break
    assert all(posted.get(url) == 1 for url in wanted), {u: posted.get(u) for u in wanted}


def _urls(prefix: str, n: int) -> bytes:
    return "\n".join(f"https://example.com/{prefix}/{i}" for i in range(n)).encode()


def _operator(stack: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    """The CLI's AWS commands, as an operator runs them against the stack's outputs."""
    from scrape_pipeline_local.moto_server import forget_cached_clients
    from tests.cli.conftest import stack_environment

    assert stack.resources is not None
    enable = _stuck_row(stack)  # for the operator's reconcile
    _deploy_outputs(stack)
    for name, value in stack_environment(stack).items():
        monkeypatch.setenv(name, value)
    for name in STACK_OUTPUTS.values():  # --stack-name sets them: undone after the module
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY")  # the key from its secret, as deployed
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    forget_cached_clients()
    hook = stack.webhook_ids["extract_completed"]
    secret = stack.resources.webhook_secret_arn
    assert stack.front is not None
    urls = tmp / "urls.txt"
    urls.write_text("https://example.com/a\nhttps://example.com/b\n")
    crawls = tmp / "crawls.txt"
    crawls.write_text("https://example.com/iam-crawl\n")
    stored, since = _audited(stack)
    commands = [
        ["status"],  # without DLQ_URL: the DLQ from the job queue's redrive policy
        ["reconcile"],
        ["dlq", "inspect"],
        ["dlq", "redrive"],
        ["webhooks", "rotate-secret", hook, "--secret-id", secret],
        [
            "webhooks",
            "register",
            stack.front.url("/webhooks/geonode"),
            "extract_completed",
            "--store-secret",
            secret,
        ],
        # announced to the ledger; a journal of its own, so no earlier run is resumed
        ["submit", str(urls), "--mode", "batch", "--journal", str(tmp / "runs.sqlite3")],
        # the stack's journal in the ledger table, the crawl announced in the same write
        ["submit", str(crawls), "--mode", "crawl", "--run", "iam-crawl"],
        ["runs", "list"],
        ["runs", "resolve", "iam-crawl"],
        ["deliveries", "replay", hook, "--since-minutes", "60"],
        ["webhooks", "setup"],  # the first day's commands
        ["doctor"],
        ["secrets", "put-api-key", "--stdin"],
        ["audit", "--since", since],  # reads a dead letter's reason: dead-letters/*
        ["results", "get", stored, "--out", str(tmp / "result")],  # reads results/*
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{API_KEY}\n"))
    with acting_as(OPERATOR, "cli"):
        for i, argv in enumerate(commands):
            stack_name = ["--stack-name", STACK_NAME] if i else []
            code = main([*argv, *stack_name, "--json"], clock=stack.clock)
            # audit's verdict on the faults' jobs is not this test's business (tests/cli's)
            assert code in ({0, 1} if argv[0] == "audit" else {0}), argv
            # moto shows a message strictly after its visible-at instant (a manual clock)
            stack.clock.advance(0.01)
        _webhook_first(stack)
        _events_tail(stack)
    enable()


def _events_tail(stack: LocalStack) -> None:
    """``events tail`` until one event comes: its rule and queue made, read, removed.

    The tail runs in a thread of its own (the operator's principal copied in); the harness
    watches for its rule and puts the event through moto's backend in this process, not
    botocore, so that no call of the harness's is taken for the operator's meanwhile.
    """
    from moto.events.models import events_backends

    assert stack.resources is not None
    bus = events_backends[ACCOUNT_ID][REGION].event_buses[stack.resources.event_bus]
    codes: list[int] = []
    argv = ["events", "tail", "--max-events", "1", "--wait", "0", "--stack-name", STACK_NAME]
    context = contextvars.copy_context()  # the operator's principal, in the tail's thread
    tail = threading.Thread(target=context.run, args=(lambda: codes.append(main(argv)),))
    tail.start()
    for _ in range(1000):
        if any(name.startswith(TAIL_PREFIX) and rule.targets for name, rule in bus.rules.items()):
            break
        time.sleep(0.01)  # real time: the tail's thread sets its rule up on moto's server
    detail = json.dumps({"event_id": "iam-tail"})
    entry = {"Source": SOURCE, "DetailType": "Job Stored", "Detail": detail}
    events_backends[ACCOUNT_ID][REGION].put_events([{**entry, "EventBusName": bus.name}])
    tail.join(timeout=30)
    assert not tail.is_alive() and codes == [0], codes
    assert not [name for name in bus.rules if name.startswith(TAIL_PREFIX)]  # removed on exit


def _audited(stack: LocalStack) -> tuple[str, str]:
    """A stored extract job's id for ``results get``, and the start of a window for ``audit``
    holding a job with a dead-letter record (written here, by no principal)."""
    from scrape_pipeline.geonode.fields import format_time
    from scrape_pipeline.processor.results import ResultStore

    assert stack.resources is not None
    bucket = stack.resources.bucket
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="results/extract/")["Contents"]
    stored = next(o["Key"] for o in listed if o["Key"].endswith("/metadata.json")).split("/")[2]
    dead = stack.sim.submit_extract(API_KEY, "https://example.com/iam-dead-letter")
    record = {"job_id": dead.job_id, "reason": "iam"}
    ResultStore(bucket, client=s3).dead_letter(JobKind.EXTRACT, dead.job_id, record)
    since = format_time(stack.clock.time() - 60.0)
    stack.clock.advance(1.0)  # past the simulator's listing lag
    return stored, since


def _webhook_first(stack: LocalStack) -> None:
    """``submit``'s announcing transaction when the job's webhook came first: the ledger row
    is checked, not put. The journal's own call, made here because a local webhook never
    outruns the write of the job id."""
    from scrape_pipeline.runs.dynamodb import DynamoJournal
    from scrape_pipeline.runs.plan import RunMode, RunSpec

    assert stack.resources is not None
    db = boto3.client("dynamodb")
    journal = DynamoJournal(stack.resources.table, client=db)
    spec = RunSpec.of(["https://example.com/iam-webhook-first"], RunMode.CRAWL)
    run, _ = journal.plan(spec, "iam-webhook-first", stack.clock.time())
    [entry] = journal.entries(run.name)
    claimed = journal.claim(entry, "operator", stack.clock.time())
    ledger = Ledger(stack.resources.table, client=db, clock=stack.clock)
    ledger.record(JobKey(JobKind.CRAWL, "iam-webhook-first"), source="webhook")
    assert journal.submit(claimed, "operator", "iam-webhook-first", stack.clock.time()).announced


def _operator_then_undo(stack: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    """``_operator``, its environment undone while the stack still runs: undone after the stack
    stopped, it would put back the stack's endpoints for the tests that come next."""
    try:
        _operator(stack, monkeypatch, tmp)
    finally:
        monkeypatch.undo()


def _deploy_outputs(stack: LocalStack) -> None:
    """A CloudFormation stack in moto whose outputs name the local resources (``--stack-name``)."""
    assert stack.resources is not None
    res = stack.resources
    values = {
        "LedgerTableName": res.table,
        "JobQueueUrl": res.queue_url,
        "JobDeadLetterQueueUrl": res.dlq_url,
        "ResultsBucketName": res.bucket,
        "WebhookSecretArn": res.webhook_secret_arn,
        "GeonodeApiKeySecretArn": res.api_key_secret_arn,
        "WebhookUrl": stack.front.url("/webhooks/geonode") if stack.front else "",
        "EventBusName": res.event_bus,
    }
    body = {
        "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in values.items()},
    }
    with warnings.catch_warnings():  # moto creates no placeholder; the outputs are what counts
        warnings.simplefilter("ignore", UserWarning)
        boto3.client("cloudformation").create_stack(
            StackName=STACK_NAME, TemplateBody=json.dumps(body)
        )


def _record(
    name: str,
    scenario: Callable[[LocalStack], None],
    operator: Callable[[LocalStack], None] | None = None,
    settings: StackSettings | None = None,
    **sim: Any,
) -> Recorded:
    with CallRecorder() as recorder:
        stack = LocalStack(ManualClock(), SimConfig(**{**QUIET, **sim}), settings).start()
        levels = {fn: module.logger.log_level for fn, module in stack.handlers.items()}
        try:
            for module in stack.handlers.values():
                module.logger.setLevel("ERROR")  # thousands of invocations: keep them quiet
            scenario(stack)
            if operator is not None:
                operator(stack)
        finally:
            for fn, module in stack.handlers.items():
                module.logger.setLevel(levels[fn])
            stack.stop()
    assert stack.resources is not None
    unattributed = {f"{s}:{o}": n for (s, o), n in sorted(recorder.unattributed.items())}
    ambiguous = {f"{s}:{o}": n for (s, o), n in sorted(recorder.ambiguous.items())}
    return Recorded(name, stack.resources, dict(recorder.calls), unattributed, ambiguous)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Recorded]]:
    monkeypatch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("operator")
    try:
        yield [
            _record(
                "faults",
                _faults,
                lambda stack: _operator_then_undo(stack, monkeypatch, tmp),
                StackSettings(reconcile_interval=60.0),
            ),
            _record(
                "long tail",
                _long_tail,
                settings=StackSettings(
                    env={
                        "NOT_FOUND_MAX_TRIES": "3",
                        "RECONCILE_OVERLAP_SECONDS": "400",
                        "WATCH_AFTER_SECONDS": "300",
                    }
                ),
                job_duration_min_s=600,
                job_duration_max_s=700,
                not_found_lag_s=300,
                retryable_failure_rate=0.3,
            ),
            _record(
                "submissions",
                _submissions,
                # a run outlives its invocations: 4 s each, claims stopped 2.8 s before the end
                # (room for a POST begun late on a busy machine: no other invocation is killed
                # to wait out the queue's visibility timeout)
                settings=StackSettings(
                    submitter_timeout=4.0, env={"SUBMITTER_MARGIN_SECONDS": "2.8"}
                ),
                job_duration_min_s=600,
                job_duration_max_s=700,
                # the killed POST's connection is held past the invocation's timeout
                lost_answer_hold_s=5.0,
            ),
        ]
    finally:
        monkeypatch.undo()


# -- the functions' roles --------------------------------------------------------------------


def _function_ids() -> dict[str, str]:
    """Local function name (``functions/<name>/``) -> the template's logical id."""
    sam = template()
    return {
        str(resource["Properties"]["CodeUri"]).strip("/").split("/")[-1]: logical_id
        for logical_id, resource in sam["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def _justified(logical_id: str) -> dict[str, str]:
    metadata = template()["Resources"][logical_id].get("Metadata", {})
    return {action.lower(): why for action, why in metadata.get(JUSTIFIED_KEY, {}).items()}


def _report(runs: list[Recorded]) -> dict[str, Any]:
    """Every request per principal with its decision, and the allowed actions never used."""
    report: dict[str, Any] = {"denied": [], "functions": {}, "unattributed": {}}
    functions = [*sorted(_function_ids().items()), (OPERATOR, OPERATOR)]
    used: dict[str, dict[str, int]] = {name: defaultdict(int) for name, _ in functions}
    requests: dict[str, dict[str, dict[str, Any]]] = {name: {} for name, _ in functions}
    allowed: dict[str, set[str]] = {name: set() for name, _ in functions}
    unused_grants: dict[str, set[str]] = {name: set() for name, _ in functions}
    role_names: dict[str, str] = {OPERATOR: "docs/security.md operator policy"}
    for run in runs:
        report["unattributed"][run.name] = run.unattributed
        report["denied"] += [
            f"{run.name}: {n} {op} calls of unknown principal" for op, n in run.ambiguous.items()
        ]
        roles = iam.function_roles(translate(), run.resources.created)
        for name, logical_id in functions:
            if name == OPERATOR:
                documents = [_operator_policy(run.resources)]
            else:
                documents = roles[logical_id].documents
                role_names[name] = roles[logical_id].name
            allowed[name] |= iam.allowed_actions(documents)
            made = []
            for call, count in run.calls.items():
                if call.principal != name:
                    continue
                for request in iam.requests_of(call):
                    made.append(request)
                    decision = iam.evaluate(documents, request)
                    used[name][request.action.lower()] += count
                    key = f"{request.action} {_generic(request.resource, run.resources)}"
                    entry = requests[name].setdefault(
                        key, {"operations": set(), "calls": 0, "via": set(), "decision": ""}
                    )
                    entry["operations"].add(f"{call.service}:{call.operation}")
                    entry["via"].add(call.via)
                    entry["calls"] += count
                    entry["decision"] = decision.reason
                    if not decision.allowed:
                        report["denied"].append(f"{name}: {key} ({decision.reason})")
            unused_grants[name] |= {
                _generic_grant(grant, run.resources) for grant in iam.unused_grants(documents, made)
            }
    unknown = {c.principal for run in runs for c in run.calls} - set(used)
    report["denied"] += [f"{p}: calls by a principal with no role" for p in sorted(unknown)]
    for name, logical_id in functions:
        justified = {} if name == OPERATOR else _justified(logical_id)
        unused = allowed[name] - set(used[name])
        report["functions"][name] = {
            "role": role_names[name],
            "requests": {
                key: {**v, "operations": sorted(v["operations"]), "via": sorted(v["via"])}
                for key, v in sorted(requests[name].items())
            },
            "actions_used": dict(sorted(used[name].items())),
            "unused_justified": {a: justified[a] for a in sorted(unused & set(justified))},
            "unused_unjustified": sorted(unused - set(justified)),
            "justified_but_used": sorted(set(justified) & set(used[name])),
            "unused_resources": sorted(unused_grants[name]),
        }
    return report


def _generic(arn: str, resources: StackResources) -> str:
    """An ARN as the template names it: the logical id, then an index or an S3 key's prefix."""
    for logical_id, physical in resources.created.items():
        for value in {physical.ref, *physical.attributes.values()}:
            if value.startswith("arn:") and (arn == value or arn.startswith(f"{value}/")):
                rest = arn[len(value) :]
                if physical.type == BUCKET and rest:
                    rest = f"/{rest.split('/')[1]}/*"
                return f"{logical_id}{rest}"
    return arn


def _generic_grant(grant: str, resources: StackResources) -> str:
    """An unused grant with its resource as the template names it."""
    head, _, resource = grant.rpartition(" on ")
    return f"{head} on {_generic(resource, resources)}"


def _operator_policy(resources: StackResources) -> dict[str, Any]:
    """docs/security.md's operator policy, its ${placeholders} set to the local stack's values."""
    match = POLICY_BLOCK.search(PAGE.read_text())
    assert match, "docs/security.md has no operator IAM policy block (<!-- operator-iam-policy -->)"
    values = {
        "Region": REGION,
        "Account": ACCOUNT_ID,
        "StackName": STACK_NAME,
        "LedgerTableName": resources.table,
        "JobQueueName": resources.queue_url.rstrip("/").rsplit("/", 1)[-1],
        "JobDeadLetterQueueName": resources.dlq_url.rstrip("/").rsplit("/", 1)[-1],
        "WebhookSecretArn": resources.webhook_secret_arn,
        "GeonodeApiKeySecretArn": resources.api_key_secret_arn,
        "ResultsBucketName": resources.bucket,
        "EventBusName": resources.event_bus,
    }
    text = re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], match.group(1))
    policy: dict[str, Any] = json.loads(text)
    return policy


@pytest.fixture(scope="module")
def report(recorded: list[Recorded]) -> dict[str, Any]:
    out = _report(recorded)
    target = os.environ.get("IAM_REPORT")
    if target:
        Path(target).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return out


def test_iam_every_function_call_allowed_by_its_role(report: dict[str, Any]):
    # GIVEN every call the scenarios made, WHEN evaluated against the caller's role
    # THEN none is denied (a missing action or a resource ARN the policy misses)
    assert report["denied"] == [], "\n".join(report["denied"])
    for name in ("receiver", "processor", "reconciler", "submitter"):
        assert report["functions"][name]["requests"], f"{name} made no AWS call"


def test_iam_every_allowed_action_used_or_justified(report: dict[str, Any]):
    # GIVEN each role's allowed actions, THEN each was used, or the template justifies it
    unjustified = {
        name: f["unused_unjustified"]
        for name, f in report["functions"].items()
        if f["unused_unjustified"]
    }
    assert unjustified == {}, f"allowed, never used, not justified in Metadata: {unjustified}"
    stale = {
        n: f["justified_but_used"]
        for n, f in report["functions"].items()
        if f["justified_but_used"]
    }
    assert stale == {}, f"justified as unused but used: drop the justification: {stale}"


def test_iam_every_allowed_resource_reached(report: dict[str, Any]):
    # GIVEN an action a role uses, THEN each resource a statement grants it on was reached
    # (a table ARN next to the index the calls query would be one too many)
    wider = {
        n: f["unused_resources"] for n, f in report["functions"].items() if f["unused_resources"]
    }
    assert wider == {}


@pytest.mark.parametrize("function", ["processor", "submitter"])
def test_iam_event_source_acts_with_the_functions_role(report: dict[str, Any], function: str):
    # Lambda's SQS poller receives and deletes with the function's role: both are recorded
    requests = report["functions"][function]["requests"]
    via = {key.split()[0] for key, v in requests.items() if "event source" in v["via"]}
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage"} <= via


def test_iam_policies_lint_clean(recorded: list[Recorded]):
    # GIVEN the roles' inline policies and the operator's, THEN parliament finds nothing,
    # except the Version SAM's policy templates leave out (no policy variables in them)
    resources = recorded[0].resources
    roles = iam.function_roles(translate(), resources.created)
    sam = template()["Resources"]
    findings: dict[str, list[str]] = {}
    for logical_id, role in roles.items():
        written = sam[logical_id]["Properties"].get("Policies", [])
        for i, document in enumerate(role.documents[: len(written)]):
            from_policy_template = "Statement" not in written[i]
            found = [
                f
                for f in iam.lint(document)
                if not (from_policy_template and f.startswith("NO_VERSION"))
            ]
            if found:
                findings[f"{role.name}[{i}]"] = found
    operator = iam.lint(_operator_policy(resources))
    if operator:
        findings["operator"] = operator
    assert findings == {}


def test_iam_every_function_has_a_role_in_the_translation():
    functions = resources_of_type(translate(), "AWS::Lambda::Function")
    assert set(_function_ids().values()) == set(functions)
    assert API_KEY  # the stack's key is what the operator's secret holds
