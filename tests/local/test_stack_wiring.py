"""Local ``stack``: it takes batching and timeouts from template.yaml, or overrides."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.settings import local_settings
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_local.translate import translate

QUIET = SimConfig(
    seed=5,
    rate_limit_per_s=0,
    retryable_failure_rate=0.0,
    permanent_failure_rate=0.0,
    job_duration_min_s=1,
    job_duration_max_s=2,
    webhook_jitter=0.0,
)
STEP = 1.0
LIMIT_STEPS = 120


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(ManualClock(), QUIET).start()
    yield stack
    stack.stop()


def test_the_stack_runs_each_function_under_the_templates_settings(stack):
    wiring = local_settings(translate())
    assert stack.front is not None and stack.poller is not None and stack.schedule is not None

    assert stack.front.timeout_seconds == wiring["receiver_timeout"]
    assert stack.poller.timeout_seconds == wiring["processor_timeout"]
    assert stack.schedule.timeout_seconds == wiring["reconciler_timeout"]
    assert stack.poller.batch_size == wiring["batch_size"]
    assert stack.poller.batching_window_seconds == wiring["batching_window_seconds"] > 0
    assert stack.schedule.interval == wiring["reconcile_interval"]
    # AND Lambda retries a failed scheduled run as the reconciler's EventInvokeConfig says
    assert stack.schedule.max_retries == wiring["reconciler_retries"] == 0


def test_a_lone_message_is_processed_once_the_batching_window_has_passed(stack):
    assert stack.poller is not None
    window = stack.poller.batching_window_seconds
    stack.client().submit_extract("https://example.com/lone")

    held_at = None
    for _ in range(LIMIT_STEPS):
        stack.step(STEP)
        if held_at is None and stack.poller.held:
            held_at = stack.clock.time() - STEP  # it was received during that step's settle
            assert stack.poller.batches == 0
        if stack.poller.batches:
            break

    assert held_at is not None and stack.poller.batches == 1
    # Invoked at the first settle at or past the window, not before.
    waited = stack.clock.time() - STEP - held_at
    assert window <= waited <= window + STEP


def test_settings_override_the_template():
    overrides: dict[str, Any] = {
        "processor_timeout": 1,
        "receiver_timeout": 2,
        "reconciler_timeout": 3,
        "batch_size": 4,
        "batching_window_seconds": 0,
        "reconcile_interval": 60,
    }
    stack = LocalStack(ManualClock(), QUIET, StackSettings(**overrides, webhooks=False)).start()
    try:
        assert stack.front is not None and stack.poller is not None
        assert stack.schedule is not None
        seen = {
            "processor_timeout": stack.poller.timeout_seconds,
            "receiver_timeout": stack.front.timeout_seconds,
            "reconciler_timeout": stack.schedule.timeout_seconds,
            "batch_size": stack.poller.batch_size,
            "batching_window_seconds": stack.poller.batching_window_seconds,
            "reconcile_interval": stack.schedule.interval,
        }
        assert seen == overrides
    finally:
        stack.stop()


def _emf_services(out: str) -> dict[str, set[str]]:
    """Metric name -> the `service` dimension values of the EMF records printed."""
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                found.setdefault(metric["Name"], set()).add(record.get("service", "(none)"))
    return found


def test_each_local_function_runs_under_its_template_environment(stack, capsys):
    # GIVEN the stack, whose functions share one process
    wiring = local_settings(translate())
    services = {
        name: wiring["function_env"][f"{name.capitalize()}Function"]["POWERTOOLS_SERVICE_NAME"]
        for name in ("receiver", "processor", "reconciler")
    }
    assert services == {
        "receiver": "receiver",
        "processor": "processor",
        "reconciler": "reconciler",
    }
    # THEN each function's Logger and Metrics carry its own service name
    for name, service in services.items():
        assert stack.handlers[name].logger.service == service
        assert stack.handlers[name].metrics.provider.service == service
    # and the variables only one function gets (here the receiver's) are the template's
    assert os.environ["SIGNATURE_TOLERANCE_SECONDS"] == wiring["env"]["SIGNATURE_TOLERANCE_SECONDS"]
    assert os.environ["LEASE_SECONDS"] == wiring["env"]["LEASE_SECONDS"]

    # WHEN a job goes through webhook, queue and processor, and the reconciler runs
    stack.client().submit_extract("https://example.com/service-names")
    capsys.readouterr()
    for _ in range(LIMIT_STEPS):
        stack.step(STEP)
    out = capsys.readouterr().out

    # THEN every EMF record carries the service dimension the deployed alarms read
    emitted = _emf_services(out)
    assert emitted["WebhookAccepted"] == {"receiver"}
    assert emitted["JobsStored"] == {"processor"}
    assert emitted["ReconcilerListPages"] == {"reconciler"}
    assert emitted["JobsRecovered"] == {"reconciler"}  # the run's total and each source's
    assert '"service":"service_undefined"' not in out
