"""The Geonode API key rotated under warm containers, on the local stack.

Judged from outside: the results bucket, the simulator's count of the answers it gave (401s
included), and the record of the AWS calls the processor made.
"""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.processor.queue import JobMessage
from scrape_pipeline_local.aws_calls import CallRecorder
from scrape_pipeline_local.events import sqs_event
from scrape_pipeline_local.stack import API_KEY, LocalStack
from tests.pipeline.conftest import MakeStack, outcome_keys, versions
from tests.pipeline.direct import all_stored, enqueue, quiet_stack, settled_jobs

NEW_KEY = "rotated-local-key"
UNAUTHORIZED = "401"


@pytest.fixture
def recorder() -> Iterator[CallRecorder]:
    """Every AWS call of the stacks started inside it, with who made it."""
    with CallRecorder() as calls:
        yield calls


def settled(stack: LocalStack, key: str, n: int, prefix: str) -> list[str]:
    """``n`` completed extract jobs, submitted with ``key``."""
    assert stack.simulator is not None
    client = GeonodeClient(
        key,
        base_url=stack.simulator.base_url,
        clock=stack.clock,
        retry=RetryPolicy(max_attempts=6, deadline=120),
    )
    return settled_jobs(stack, n, prefix, client)


def rotate(stack: LocalStack, stored: str, accepted: str) -> None:
    """The operator stores ``stored`` as the key; the API accepts ``accepted`` from now on."""
    assert stack.resources is not None
    boto3.client("secretsmanager").put_secret_value(
        SecretId=stack.resources.api_key_secret_arn, SecretString=stored
    )
    stack.sim.rotate_api_key(API_KEY, accepted)


def unauthorized(stack: LocalStack) -> int:
    counts: dict[str, int] = stack.sim.request_counts()["by_status"]
    return counts.get(UNAUTHORIZED, 0)


def test_api_key_rotated_reaches_a_warm_processor_at_its_first_401(make_stack: MakeStack):
    # GIVEN a warm processor that read the key once and stored jobs with it
    stack = quiet_stack(make_stack)
    warm = settled(stack, API_KEY, 2, "before")
    enqueue(stack, warm)
    stack.run_until(lambda: all_stored(stack, warm), step=5.0, limit=120)
    # WHEN the key is rotated (new key stored, old one revoked) and more jobs arrive
    rotate(stack, stored=NEW_KEY, accepted=NEW_KEY)
    later = settled(stack, NEW_KEY, 3, "after")
    enqueue(stack, later)
    # THEN they are stored at once (not after the container recycles), at the cost of one 401
    stack.run_until(lambda: all_stored(stack, later), step=5.0, limit=60)
    assert unauthorized(stack) == 1
    assert all(versions(stack)[outcome_keys(j)[0]] == 1 for j in later)


def test_api_key_wrong_costs_one_secret_read_per_interval(
    make_stack: MakeStack, recorder: CallRecorder
):
    # GIVEN a warm processor, then a rotation whose stored key is not the one the API accepts
    stack = quiet_stack(make_stack)
    warm = settled(stack, API_KEY, 1, "warm")
    enqueue(stack, warm)
    stack.run_until(lambda: all_stored(stack, warm), step=5.0, limit=120)
    before = reads_of_the_key(stack, recorder)
    rotate(stack, stored="a-wrong-key", accepted=NEW_KEY)
    jobs = settled(stack, NEW_KEY, 5, "refused")
    # WHEN five jobs are retried for ten minutes (every answer a 401)
    enqueue(stack, jobs)
    for _ in range(120):
        stack.step(5.0)
    # THEN nothing is stored, and the key was read again at most once per 30 s interval (not
    # once per message or per 401)
    assert not any(outcome_keys(j)[0] in versions(stack) for j in jobs)
    refused = unauthorized(stack)
    reads = reads_of_the_key(stack, recorder) - before
    assert refused > 5, refused
    assert 1 <= reads <= 600 / 30 + 1, (reads, refused)
    assert reads < refused


def reads_of_the_key(stack: LocalStack, recorder: CallRecorder) -> int:
    assert stack.resources is not None
    arn = stack.resources.api_key_secret_arn
    return sum(
        count
        for call, count in recorder.calls.items()
        if call.principal == "processor"
        and call.operation == "GetSecretValue"
        and call.param("SecretId") == arn
    )


def test_api_key_unreadable_while_building_is_an_aws_outage(make_stack: MakeStack):
    # GIVEN a cold processor whose key secret cannot be read (deleted: Secrets Manager refuses)
    stack = quiet_stack(make_stack)
    assert stack.resources is not None
    boto3.client("secretsmanager").delete_secret(
        SecretId=stack.resources.api_key_secret_arn, ForceDeleteWithoutRecovery=True
    )
    # WHEN a batch arrives
    outcome = stack.invoke(
        "processor", sqs_event([JobMessage(JobKey(JobKind.EXTRACT, "j1"), "t").to_json()])
    )
    # THEN the invocation fails as an AWS outage (retried), not with Powertools' own error
    assert isinstance(outcome.error, AWSUnavailableError), repr(outcome.error)
    assert outcome.error.service == "secretsmanager"
