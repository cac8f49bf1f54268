"""The processor handler fuzzed with hostile message bodies mixed into batches of good ones.

Property: whatever a record's body holds (any JSON, any size, any nesting, any text), it is
that record's failure alone. The handler returns, reports every hostile record in
``batchItemFailures`` and none of the good ones, and every good job is stored (S3, one version).

Everything is real: messages go through the stack's SQS queue (moto), the event is built from
what SQS returned (message ids, receipt handles, receive counts), the handler runs as the
stack invokes it, and the good jobs are the simulator's own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.processor.queue import JobMessage
from scrape_pipeline_local.events import sqs_event_of
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline import conftest as pipeline
from tests.pipeline.conftest import MakeStack, outcome_keys, truth, versions
from tests.property.conftest import examples

if TYPE_CHECKING:
    from types_boto3_sqs.client import SQSClient
    from types_boto3_sqs.type_defs import MessageTypeDef

make_stack = pipeline.make_stack  # the pipeline tests' fixture, for this module too
NO_RECONCILER = 10.0**9  # a schedule that never fires: the test drives what runs
SQS_MAX_PER_CALL = 10
# The processor's event source delivers at most ten messages a batch (template.yaml).
BATCH_MAX = 10


def sqs_text(text: str) -> bool:
    """SQS accepts only these characters in a body (#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD ...)."""
    return all(
        c in "\t\n\r" or "\x20" <= c <= "\ud7ff" or "\ue000" <= c <= "\ufffd" or c >= "\U00010000"
        for c in text
    )


# -- strategies: what a hostile body may hold -----------------------------------------------

# Text with everything JSON can escape, lone surrogates included (json.dumps writes \\udXXX).
any_text = st.text(st.characters(), max_size=30)
# SQS refuses an empty body.
sqs_safe_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=60).filter(sqs_text)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**400),  # far beyond any 64-bit id
    st.floats(allow_nan=True, allow_infinity=True),
    any_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
# Job ids that are not ids: wrong type, lone surrogates, control characters, paths, too long.
hostile_ids = st.one_of(
    json_values,
    any_text,
    st.sampled_from(
        [
            "",
            "\ud800",
            "abc\udfff",
            "abc\n",
            "a\x00b",
            "../../etc/passwd",
            "a/b?c=d",
            "x" * 129,
            "x" * 70_000,
            "#",
            " leading-space",
        ]
    ),
)
kinds = st.sampled_from([k.value for k in JobKind]) | json_values


@st.composite
def message_like(draw: st.DrawFn) -> str:
    """A document shaped like a job message, with at least one field that is not ours."""
    document: dict[str, Any] = {}
    if draw(st.booleans()):
        document["kind"] = draw(kinds)
    document["job_id"] = draw(hostile_ids)
    if draw(st.booleans()):
        document["source"] = draw(json_values)
    return json.dumps(document, ensure_ascii=True)


def nested(depth: int, opener: str, closer: str, inner: str = "1") -> str:
    return opener * depth + inner + closer * depth


hostile_bodies = st.one_of(
    sqs_safe_text,
    json_values.map(lambda v: json.dumps(v, ensure_ascii=True)),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False)).filter(sqs_text),
    message_like(),
    st.sampled_from(
        [
            "null",
            "[]",
            "{}",
            '"a string"',
            "1" * 5000,  # more digits than int() converts
            '{"kind": "extract", "job_id": ' + "9" * 5000 + "}",
            '{"kind": "extract", "job_id": 1e999999}',
            "[" * 100_000,  # deeper than the parser's stack, unbalanced
            nested(50_000, "[", "]"),
            nested(sys.getrecursionlimit() - 10, '{"a":', "}"),  # just inside the parser's depth
            '{"kind": "extract", "job_id": "\\ud800"}',  # an escaped lone surrogate
            '{"kind": "extract", "job_id": "ok", "job_id": ["dup"]}',
            '{"kind": ["extract"], "job_id": "abc"}',
            '{"kind": {"a": 1}, "job_id": "abc"}',
            '[{"kind": "extract", "job_id": "in-a-list"}]',
            "\ufeff{}",  # a byte-order mark
            "eyJraW5kIjoiZXh0cmFjdCJ9",  # base64 of a JSON object
        ]
    ),
)


# Bodies that made the whole handler raise (every good batch-mate failed with them): nesting
# deeper than the parser's stack raised RecursionError while the batch was being ordered.
KNOWN_KILLERS = ("[" * 100_000, '{"a":' * 100_000)


@dataclass(frozen=True)
class Batch:
    """How many good jobs, the hostile bodies, and the order they are sent in."""

    good: int
    hostile: list[str]
    order: list[int]


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    good = draw(st.integers(1, 4))
    hostile = draw(st.lists(hostile_bodies, min_size=1, max_size=BATCH_MAX - good))
    order = draw(st.permutations(range(good + len(hostile))))
    return Batch(good, hostile, list(order))


# -- the stack ------------------------------------------------------------------------------


class JobPool:
    """Completed extract jobs no message has named yet, submitted a few at a time."""

    def __init__(self, stack: LocalStack) -> None:
        self._stack = stack
        self._client = stack.client()
        self._free: list[str] = []
        self._submitted = 0

    def take(self, n: int) -> list[str]:
        if len(self._free) < n:
            self._refill(max(n, 20))
        taken, self._free = self._free[:n], self._free[n:]
        return taken

    def _refill(self, n: int) -> None:
        for _ in range(n):
            url = f"https://example.com/fuzz{self._submitted}"
            self._free.append(self._client.submit_extract(url).job_id)
            self._submitted += 1
        self._stack.run_until(
            lambda: all(j["status"] == "completed" for j in truth(self._stack)), step=5.0
        )


def received(sqs: SQSClient, queue_url: str, count: int) -> list[MessageTypeDef]:
    """Every message just sent, as the event source receives them."""
    messages: list[MessageTypeDef] = []
    for _ in range(50):
        if len(messages) >= count:
            break
        messages += sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(SQS_MAX_PER_CALL, count - len(messages)),
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
    assert len(messages) == count, f"received {len(messages)} of {count}"
    return messages


def run_batch(stack: LocalStack, pool: JobPool, batch: Batch) -> None:
    """Send the batch, invoke the processor on it once, check what became of each record."""
    assert stack.resources is not None
    sqs = boto3.client("sqs")
    queue_url = stack.resources.queue_url
    good_ids = pool.take(batch.good)
    good = [JobMessage(JobKey(JobKind.EXTRACT, j), "test").to_json() for j in good_ids]
    bodies = good + batch.hostile
    sent: dict[str, int] = {}  # message id -> index into bodies
    for index in batch.order:
        sent[sqs.send_message(QueueUrl=queue_url, MessageBody=bodies[index])["MessageId"]] = index
    messages = received(sqs, queue_url, len(bodies))
    records = sqs_event_of(messages)

    outcome = stack.invoke("processor", records)

    for start in range(0, len(messages), SQS_MAX_PER_CALL):  # the next example starts empty
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(messages[start : start + SQS_MAX_PER_CALL])
            ],
        )
    assert outcome.ok, f"the handler raised: {outcome.error!r}"
    failed = {f["itemIdentifier"] for f in outcome.result["batchItemFailures"]}
    good_failed = [sent[m] for m in failed if sent[m] < batch.good]
    hostile_passed = [sent[m] for m in sent if sent[m] >= batch.good and m not in failed]
    assert not good_failed, f"good records reported failed: {good_failed}"
    assert not hostile_passed, f"hostile records taken for done: {hostile_passed}"
    seen = versions(stack)
    missing = [j for j in good_ids if seen[outcome_keys(j)[0]] != 1]
    assert not missing, f"good jobs not stored once: {missing}"
    event(f"{len(batch.hostile)} hostile")


@pytest.mark.parametrize(
    "slow",
    [pytest.param(False, id="suite"), pytest.param(True, id="thorough", marks=pytest.mark.slow)],
)
def test_processor_fuzz_a_hostile_body_fails_its_record_alone(make_stack: MakeStack, slow: bool):
    # GIVEN the whole stack, with no webhooks and no reconciler: only the batches sent here
    # reach the processor
    stack = make_stack(
        StackSettings(webhooks=False, reconcile_interval=NO_RECONCILER),
        job_duration_min_s=1,
        job_duration_max_s=4,
    )
    pool = JobPool(stack)
    check: Callable[[Batch], None] = lambda batch: run_batch(stack, pool, batch)  # noqa: E731

    # WHEN batches mix good jobs' messages with hostile bodies, in any order
    # THEN each is handled as the module docstring says (checked in run_batch)
    fuzzed = given(batches())(check)
    for known in KNOWN_KILLERS:  # what failed whole batches before: always tried first
        fuzzed = example(Batch(1, [known], [1, 0]))(fuzzed)
    settings(max_examples=examples(15, slow=slow))(fuzzed)()
