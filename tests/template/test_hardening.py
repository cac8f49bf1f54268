"""What a flood can cost, what is traced, what cannot be lost: template.yaml's guards, translated.

The API key travels over https only; the receiver and the processor have concurrency bounds,
the API writes access logs and the reconciler drops stale schedule events; tracing is on by
default, from the services alone; the ledger refuses deletion and the results bucket ages out
old versions only. Each assertion reads what CloudFormation deploys (issue 17, items 4, 6-8).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline_local.resolve import Resolver
from tests.support import iam
from tests.template.helpers import (
    REPO,
    TEMPLATE,
    describe,
    function_role,
    only_resource,
    parameter_default,
    resources_of_type,
    run,
)

RECEIVER, PROCESSOR, RECONCILER = "ReceiverFunction", "ProcessorFunction", "ReconcilerFunction"
FUNCTIONS = (RECEIVER, PROCESSOR, RECONCILER)
XRAY_WRITE = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"
# Lambda's account defaults: 1,000 concurrent executions, of which 100 must stay unreserved.
ACCOUNT_CONCURRENCY, UNRESERVED_MINIMUM = 1000, 100
# Lambda's bounds on MaximumEventAgeInSeconds, and an SQS event source's MaximumConcurrency.
EVENT_AGE_BOUNDS, SQS_CONCURRENCY_BOUNDS = (60, 21600), (2, 1000)
_RATE_MINUTES = re.compile(r"^rate\((\d+) minutes?\)$")


def _matches(template: dict[str, Any], parameter: str, value: str) -> bool:
    """Whether CloudFormation accepts ``value``: AllowedPattern must match the whole value."""
    return re.fullmatch(template["Parameters"][parameter]["AllowedPattern"], value) is not None


def _schedule_seconds() -> int:
    match = _RATE_MINUTES.match(parameter_default("ReconcileSchedule"))
    assert match, "the default schedule is a rate in minutes"
    return int(match.group(1)) * 60


def _resolved(cfn: dict[str, Any], value: Any, **parameters: str) -> Any:
    """A translated value with the parameters at their defaults, except those given."""
    resolver = Resolver(cfn)
    resolver.parameters.update(parameters)
    return resolver.resolve(value)


# --- 4. the API key over https only ----------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://scraper.geonode.io",
        "https://scraper.geonode.io/",
        "https://eu.scraper.geonode.io:8443/api",
    ],
)
def test_geonode_base_url_accepts_https(template: dict[str, Any], url: str) -> None:
    # GIVEN the GeonodeBaseUrl parameter, WHEN an https URL is given, THEN CloudFormation takes it
    assert _matches(template, "GeonodeBaseUrl", url)


@pytest.mark.parametrize(
    "url",
    [
        "http://scraper.geonode.io",
        "http://127.0.0.1:8080",
        "HTTP://scraper.geonode.io",
        "https://",
        "https:///path",
        "scraper.geonode.io",
        "https://scraper.geonode.io http://x",
    ],
)
def test_geonode_base_url_refuses_anything_but_https(template: dict[str, Any], url: str) -> None:
    # GIVEN the GeonodeBaseUrl parameter, WHEN a URL the API key would travel in clear to (or
    # no URL at all) is given, THEN CloudFormation refuses the stack before changing anything
    assert not _matches(template, "GeonodeBaseUrl", url)
    # AND says why
    assert "https" in template["Parameters"]["GeonodeBaseUrl"]["ConstraintDescription"]


def test_cfn_lint_refuses_an_http_geonode_base_url(tmp_path: Path) -> None:
    # GIVEN a copy of the template whose GeonodeBaseUrl default is plain http
    written = "    Default: https://scraper.geonode.io\n"
    text = TEMPLATE.read_text()
    assert text.count(written) == 1
    broken = tmp_path / "template.yaml"
    broken.write_text(text.replace(written, "    Default: http://scraper.geonode.io\n"))
    cfn_lint = REPO / ".venv" / "bin" / "cfn-lint"
    # WHEN cfn-lint checks it (it holds a default to the pattern, as CloudFormation a value)
    result = run([cfn_lint, "--", broken], cwd=tmp_path)
    # THEN that default, and only it, is reported as not matching the pattern
    line = text[: text.index(written)].count("\n") + 1
    assert result.returncode != 0, describe(result)
    assert re.findall(r"^(E\d+) .*\n.*:(\d+):\d+$", result.stdout, re.M) == [("E2015", str(line))]


# --- 6. what a flood can cost -------------------------------------------------------------


def test_receiver_concurrency_is_reserved_from_a_parameter(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the translated receiver
    props = cfn["Resources"][RECEIVER]["Properties"]
    # THEN its concurrency is bounded by ReceiverReservedConcurrency
    assert props["ReservedConcurrentExecutions"] == {"Ref": "ReceiverReservedConcurrency"}
    reserved = parameter_default("ReceiverReservedConcurrency")
    # AND the default serves the stage's whole rate at a second a delivery (tens of ms healthy)
    assert reserved == parameter_default("ApiThrottlingRateLimit") * 1
    assert template["Parameters"]["ReceiverReservedConcurrency"]["MinValue"] >= 1
    # AND with the reconciler's one, a default account can still reserve it
    reconciler = cfn["Resources"][RECONCILER]["Properties"]["ReservedConcurrentExecutions"]
    assert reserved + reconciler <= ACCOUNT_CONCURRENCY - UNRESERVED_MINIMUM


def test_processor_concurrency_is_bounded_by_the_event_source(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the processor's SQS event source mapping
    mapping = cfn["Resources"]["ProcessorFunctionJobs"]
    # THEN at most ProcessorMaximumConcurrency invocations run at once, 20 by default
    assert mapping["Properties"]["ScalingConfig"] == {
        "MaximumConcurrency": {"Ref": "ProcessorMaximumConcurrency"}
    }
    spec = template["Parameters"]["ProcessorMaximumConcurrency"]
    assert parameter_default("ProcessorMaximumConcurrency") == 20
    # AND every accepted value is one the event source takes
    assert (spec["MinValue"], spec["MaxValue"]) == SQS_CONCURRENCY_BOUNDS
    # AND the function itself reserves nothing: a reserved limit would throttle batches already
    # received, each throttle a receive toward the dead-letter queue
    assert "ReservedConcurrentExecutions" not in cfn["Resources"][PROCESSOR]["Properties"]


def test_webhook_stage_writes_json_access_logs_to_a_group_with_retention(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the webhook stage's access log setting
    _, stage = only_resource(cfn, "AWS::ApiGateway::Stage")
    setting = stage["Properties"]["AccessLogSetting"]
    # THEN it writes to the stack's own log group, which keeps 30 days and goes with the stack
    [(group_id, _)] = [
        (name, group)
        for name, group in resources_of_type(cfn, "AWS::Logs::LogGroup").items()
        if setting["DestinationArn"] == {"Fn::GetAtt": [name, "Arn"]}
    ]
    group = cfn["Resources"][group_id]
    assert group["Properties"]["RetentionInDays"] == 30
    assert group["DeletionPolicy"] == "Delete"
    assert group["Properties"]["LogGroupName"] == {
        "Fn::Sub": "/aws/apigateway/${AWS::StackName}-webhook-access"
    }
    # AND each request is one JSON line (API Gateway requires $context.requestId or its
    # extended form) with who sent it, what it was answered and how long it took
    fields = json.loads(setting["Format"])
    assert "\n" not in setting["Format"]
    assert {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "status": "$context.status",
        "latency": "$context.responseLatency",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integration.error",
        "resourcePath": "$context.resourcePath",
        "xrayTraceId": "$context.xrayTraceId",
    }.items() <= fields.items()
    # AND no header or body is logged (the signature and the payload stay out)
    assert all(value.startswith("$context.") for value in fields.values())
    assert not [value for value in fields.values() if "header" in value.lower()]


def test_reconciler_drops_a_stale_schedule_event_and_does_not_retry(cfn: dict[str, Any]) -> None:
    # GIVEN the reconciler's asynchronous invocation settings
    [config] = [
        c["Properties"]
        for c in resources_of_type(cfn, "AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": RECONCILER}
    ]
    assert config["Qualifier"] == "$LATEST"
    # THEN an event throttled behind a run still going is dropped after one schedule period
    # (the next run does its work), not retried for Lambda's default 6 hours
    age = config["MaximumEventAgeInSeconds"]
    assert EVENT_AGE_BOUNDS[0] <= age <= _schedule_seconds()
    # AND a failed run is not retried: the next scheduled one resumes every sweep
    assert config["MaximumRetryAttempts"] == 0
    # AND no other function is invoked asynchronously with settings of its own
    assert len(resources_of_type(cfn, "AWS::Lambda::EventInvokeConfig")) == 1


# --- 7. tracing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enabled", "mode", "stage"), [("true", "Active", True), ("false", "PassThrough", False)]
)
def test_tracing_follows_the_tracing_parameter(
    cfn: dict[str, Any], enabled: str, mode: str, stage: bool
) -> None:
    # GIVEN the TracingEnabled parameter, on by default
    assert parameter_default("TracingEnabled") == "true"
    assert cfn["Parameters"]["TracingEnabled"]["AllowedValues"] == ["true", "false"]
    # WHEN it is set
    _, api_stage = only_resource(cfn, "AWS::ApiGateway::Stage")
    # THEN every function's tracing mode and the stage's tracing follow it
    for function in FUNCTIONS:
        config = cfn["Resources"][function]["Properties"]["TracingConfig"]
        assert _resolved(cfn, config, TracingEnabled=enabled) == {"Mode": mode}, function
    assert (
        _resolved(cfn, api_stage["Properties"]["TracingEnabled"], TracingEnabled=enabled) is stage
    )


@pytest.mark.parametrize("function", FUNCTIONS)
def test_traced_functions_roles_may_send_segments(cfn: dict[str, Any], function: str) -> None:
    # GIVEN the function's role (tests/iam justifies each action no call of the code uses)
    _, role = function_role(cfn, function)
    assert XRAY_WRITE in role["Properties"]["ManagedPolicyArns"]
    # THEN Lambda may send the function's segments and telemetry with it
    document = iam.MANAGED_POLICIES[XRAY_WRITE]
    for action in ("xray:PutTraceSegments", "xray:PutTelemetryRecords"):
        assert iam.evaluate([document], iam.Request(action, "*")).allowed, action


def test_no_tracing_sdk_ships_in_the_layer_or_the_functions() -> None:
    # GIVEN what the layer installs and what the code imports
    requirements = (REPO / "layers" / "shared" / "requirements.txt").read_text().lower()
    sources = [
        *(REPO / "layers" / "shared" / "scrape_pipeline").rglob("*.py"),
        *(REPO / "functions").rglob("*.py"),
    ]
    assert sources
    # THEN tracing is the services' own segments: no X-Ray SDK or OpenTelemetry at cold start
    # (bench.cold_start measures what Powertools' Tracer would add)
    for package in ("aws-xray-sdk", "opentelemetry"):
        assert package not in requirements
    pattern = re.compile(r"^\s*(from|import)\s+(aws_xray_sdk|opentelemetry)\b|\bTracer\b", re.M)
    assert [str(path) for path in sources if pattern.search(path.read_text())] == []


# --- 8. data protection ---------------------------------------------------------------------


def test_every_table_refuses_deletion(cfn: dict[str, Any]) -> None:
    # GIVEN every DynamoDB table of the stack
    tables = resources_of_type(cfn, "AWS::DynamoDB::Table")
    assert "LedgerTable" in tables
    # THEN none can be deleted, by the stack or by anyone, until protection is turned off
    for name, table in tables.items():
        assert table["Properties"]["DeletionProtectionEnabled"] is True, name
        assert table["DeletionPolicy"] == "Retain", name


def test_results_bucket_expires_noncurrent_versions_only(cfn: dict[str, Any]) -> None:
    # GIVEN the results bucket's lifecycle rules
    [rule] = cfn["Resources"]["ResultsBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    # THEN an object version that stopped being current (a retired dead-letter record, an
    # overwritten result) is deleted NoncurrentVersionDays later, with its delete marker
    assert rule["Status"] == "Enabled"
    assert rule["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": {"Ref": "NoncurrentVersionDays"}
    }
    assert rule["ExpiredObjectDeleteMarker"] is True
    # AND by default as long as the ledger keeps the row that tells why it was retired
    assert parameter_default("NoncurrentVersionDays") >= parameter_default("LedgerTtlDays")
    # AND current objects (the results) never expire or move
    assert not {"ExpirationInDays", "ExpirationDate", "Transitions", "Transition"} & set(rule)
    assert not {"Prefix", "TagFilters"} & set(rule)
