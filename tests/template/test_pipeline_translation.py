"""The processor, the reconciler, the results bucket, their alarms and the dashboard, translated.

Like test_template_translation.py, every assertion reads the CloudFormation SAM produces: the
event source mapping, the schedule rule, the roles and the dashboard are what deploys.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import pytest

from scrape_pipeline_local.resolve import references
from tests.support.readme import OPERATIONS
from tests.template.helpers import (
    as_list,
    function_property,
    function_role,
    only_resource,
    parameter_default,
    resources_of_type,
    role_statements,
)

RECEIVER = "ReceiverFunction"
PROCESSOR = "ProcessorFunction"
RECONCILER = "ReconcilerFunction"
SUBMITTER = "SubmitterFunction"
FUNCTIONS = (RECEIVER, PROCESSOR, RECONCILER, SUBMITTER)
GUARDED_SERVICES = {"dynamodb", "s3", "sqs", "secretsmanager"}
# Where a policy may reach, written as _reach() spells an intrinsic resource.
LEDGER, PENDING_INDEX = "LedgerTable", "LedgerTable/index/pending-by-state"
RESULTS_OBJECTS, JOB_QUEUE = "ResultsBucket/*", "JobQueue"
GEONODE_KEY, WEBHOOK_SECRET = "GeonodeApiKeySecret", "WebhookSecret"
OUTBOX_INDEX, EVENT_BUS = "LedgerTable/index/outbox-by-time", "EventBus"

# Each role's whole inline grant: action -> what it reaches. A new action, or a wider
# resource, must be added here on purpose.
# (tests/iam proves each one used, and every call the processor makes allowed.)
PROCESSOR_GRANTS = {
    "dynamodb:UpdateItem": {LEDGER},
    "dynamodb:BatchGetItem": {LEDGER},  # the batch's rows, to order suspects last
    "s3:PutObject": {RESULTS_OBJECTS},
    "s3:DeleteObject": {"ResultsBucket/dead-letters/*"},  # retiring an overturned dead letter
    "s3:GetObject": {"ResultsBucket/manifest-parts/*"},  # a batch's manifest, from its parts
    "sqs:ChangeMessageVisibility": {JOB_QUEUE},
    "sqs:SendMessage": {JOB_QUEUE},
    "secretsmanager:GetSecretValue": {GEONODE_KEY},
    "events:PutEvents": {EVENT_BUS},  # a batch's outcomes, on the stack's bus only
}
RECONCILER_GRANTS = {
    "dynamodb:GetItem": {LEDGER},
    "dynamodb:PutItem": {LEDGER},
    "dynamodb:UpdateItem": {LEDGER},
    "dynamodb:BatchGetItem": {LEDGER},
    "dynamodb:Query": {PENDING_INDEX},
    "dynamodb:Scan": {OUTBOX_INDEX},  # the outbox sweep: rows whose event a crash left
    "sqs:SendMessage": {JOB_QUEUE},
    "secretsmanager:GetSecretValue": {GEONODE_KEY},
    "events:PutEvents": {EVENT_BUS},
    "s3:PutObject": {"ResultsBucket/runs/*"},  # a complete run's manifest, once
    "s3:GetObject": {"ResultsBucket/results/batch/*/manifest.json"},  # its batches' items
}
SUBMITTER_GRANTS = {
    # the run journal (run# keys) and, in the same transactions, the batches and crawls announced
    "dynamodb:GetItem": {LEDGER},
    "dynamodb:PutItem": {LEDGER},
    "dynamodb:UpdateItem": {LEDGER},
    "dynamodb:BatchGetItem": {LEDGER},
    "s3:GetObject": {"ResultsBucket/submissions/*"},  # run files and their options only
    "s3:ListBucket": {"ResultsBucket"},  # a missing options file answers 404, not 403
    "sqs:SendMessage": {"SubmissionsQueue"},  # a run's continuation
    "secretsmanager:GetSecretValue": {GEONODE_KEY},
}
BASIC_EXECUTION = "service-role/AWSLambdaBasicExecutionRole"
# What SAM attaches for `Tracing` (X-Ray writes and sampling reads, Resource "*").
XRAY_WRITE = "AWSXrayWriteOnlyAccess"
# What SAM attaches for an SQS event (samtranslator SQS.get_policy_arn); AWS's managed policy
# allows these SQS actions on every queue ("*"), so the processor's role fences them.
SQS_EVENT_POLICY = "service-role/AWSLambdaSQSQueueExecutionRole"
SQS_EVENT_POLICY_ACTIONS = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

PROCESSOR_METRICS = (
    "JobsStored",
    "JobsResubmitted",
    "JobsDeadLettered",
    "JobsCancelled",
    "JobsNotSettled",
    "GeonodeThrottled",
)
RECOVERY_SOURCES = ("job_list", "stuck_rows", "delivery_log")
PSEUDO_PARAMETERS = {"AWS::Region", "AWS::StackName", "AWS::AccountId", "AWS::Partition"}
_SUB_VARIABLE = re.compile(r"\$\{([^!}][^}]*)\}")
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours)\)$")


def _reach(resource: Any) -> str:
    """An IAM resource as a short name: LedgerTable, LedgerTable/index/*, or the literal."""
    if isinstance(resource, str):
        return resource
    if set(resource) == {"Ref"}:
        return str(resource["Ref"])
    if set(resource) == {"Fn::GetAtt"} and resource["Fn::GetAtt"][1] == "Arn":
        return str(resource["Fn::GetAtt"][0])
    sub = resource.get("Fn::Sub")
    if isinstance(sub, str) and (match := re.fullmatch(r"\$\{(\w+)\.Arn\}(.*)", sub)):
        return match.group(1) + match.group(2)
    return json.dumps(resource)


def _grants(role: dict[str, Any], effect: str = "Allow") -> dict[str, set[str]]:
    """action -> every resource a role's statements of one effect name for it."""
    grants: dict[str, set[str]] = {}
    for statement in role_statements(role):
        if statement["Effect"] != effect:
            continue
        assert "NotAction" not in statement, statement
        if effect == "Allow":
            assert "NotResource" not in statement, f"Allow with NotResource: {statement}"
        for action in as_list(statement["Action"]):
            reached = grants.setdefault(action, set())
            reached.update(_reach(r) for r in as_list(statement.get("Resource", [])))
    return grants


def _managed_policies(role: dict[str, Any]) -> list[str]:
    return [
        json.dumps(arn).split(":policy/")[-1].strip('"')
        for arn in role["Properties"].get("ManagedPolicyArns", [])
    ]


def _env(cfn: dict[str, Any], function: str) -> dict[str, Any]:
    variables: dict[str, Any] = cfn["Resources"][function]["Properties"]["Environment"]["Variables"]
    return variables


def _rate_seconds(expression: str) -> int:
    match = _RATE.match(expression)
    assert match, f"not a rate expression in minutes or hours: {expression!r}"
    unit = 60 if match.group(2).startswith("minute") else 3600
    return int(match.group(1)) * unit


def _dashboard_body(cfn: dict[str, Any]) -> tuple[str, list[str]]:
    """The dashboard's body template and the ${...} variables it substitutes."""
    _, dashboard = only_resource(cfn, "AWS::CloudWatch::Dashboard")
    body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    assert isinstance(body, str), "DashboardBody must be !Sub over a string (no variable map)"
    return body, _SUB_VARIABLE.findall(body)


def _substituted(body: str) -> Any:
    """The dashboard body with each ${Name} replaced by <Name>, parsed as JSON."""
    return json.loads(_SUB_VARIABLE.sub(lambda m: f"<{m.group(1)}>", body))


def _outcome_metrics(module: str, vocabulary: str) -> set[str]:
    """The metric of every outcome of a vocabulary (each outcome names its own)."""
    outcomes = getattr(importlib.import_module(f"scrape_pipeline.{module}"), vocabulary)
    return {outcome.metric for outcome in outcomes}


def _series(widget: dict[str, Any]) -> set[tuple[str, str, frozenset[tuple[str, str]]]]:
    """(namespace, metric, dimensions) of each line of a metric widget."""
    found = set()
    for line in widget["properties"]["metrics"]:
        namespace, name, *dims = [item for item in line if not isinstance(item, dict)]
        assert "." not in (namespace, name, *dims), "spell every line out (no '.' shorthand)"
        assert len(dims) % 2 == 0, line
        found.add((namespace, name, frozenset(zip(dims[::2], dims[1::2], strict=True))))
    return found


# --- functions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "code_uri", "service"),
    [
        (RECEIVER, "functions/receiver/", "receiver"),
        (PROCESSOR, "functions/processor/", "processor"),
        (RECONCILER, "functions/reconciler/", "reconciler"),
        (SUBMITTER, "functions/submitter/", "submitter"),
    ],
)
def test_function_code_handler_runtime_layer_and_service_name(
    cfn: dict[str, Any], template: dict[str, Any], function: str, code_uri: str, service: str
) -> None:
    # GIVEN a function as written and as translated
    props = cfn["Resources"][function]["Properties"]
    # THEN it runs app.lambda_handler from its own folder on python3.12, arm64, with the layer
    assert function_property(template, function, "CodeUri") == code_uri
    assert props["Handler"] == "app.lambda_handler"
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    layer_id, _ = only_resource(cfn, "AWS::Lambda::LayerVersion")
    assert props["Layers"] == [{"Ref": layer_id}]
    # AND its metrics carry its own service name (the alarms and dashboard filter on it)
    assert _env(cfn, function)["POWERTOOLS_SERVICE_NAME"] == service


@pytest.mark.parametrize(
    ("function", "variable", "parameter", "default"),
    [
        (PROCESSOR, "LEASE_SECONDS", "LeaseSeconds", 120),
        (PROCESSOR, "EVENT_LINGER_SECONDS", "EventLingerSeconds", 0),
        (PROCESSOR, "MAX_RESUBMISSIONS_PER_URL", "MaxResubmissionsPerUrl", 2),
        # the queue's own redrive count (test_template_translation pins the queue side)
        (PROCESSOR, "MAX_RECEIVE_COUNT", "MaxReceiveCount", 5),
        (RECONCILER, "RECONCILE_THRESHOLD_SECONDS", "ReconcileThresholdSeconds", 60),
        (RECONCILER, "RECONCILE_OVERLAP_SECONDS", "ReconcileOverlapSeconds", 30),
        (RECONCILER, "RECONCILE_FULL_SWEEP_SECONDS", "ReconcileFullSweepSeconds", 600),
        (RECONCILER, "STALE_AFTER_SECONDS", "StaleAfterSeconds", 900),
        (RECONCILER, "RECONCILE_MAX_PAGES", "ReconcileMaxPages", 1000),
    ],
)
def test_function_environment_variable_comes_from_parameter(
    cfn: dict[str, Any],
    function: str,
    variable: str,
    parameter: str,
    default: Any,
) -> None:
    # GIVEN the function's translated environment
    env = _env(cfn, function)
    # THEN the variable is the parameter, with the documented default
    assert env[variable] == {"Ref": parameter}
    assert parameter_default(parameter) == default


@pytest.mark.parametrize(
    ("variable", "parameter", "default"),
    [
        ("GEONODE_BASE_URL", "GeonodeBaseUrl", "https://scraper.geonode.io"),
        ("RESULTS_BUCKET", "ResultsBucket", None),
        ("GEONODE_API_KEY_SECRET_ID", "GeonodeApiKeySecret", None),
    ],
)
def test_globals_environment_names_geonode_and_results(
    template: dict[str, Any], variable: str, parameter: str, default: Any
) -> None:
    # GIVEN the environment every function inherits
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    # THEN the Geonode URL, the results bucket and the API key secret's ARN are there
    assert env[variable] == {"Ref": parameter}
    if default is not None:
        assert parameter_default(parameter) == default
        # AND the default passes the parameter's own pattern
        assert re.fullmatch(template["Parameters"][parameter]["AllowedPattern"], default)


def test_processor_event_source_reports_batch_item_failures_with_parameter_batching(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the event source mapping SAM translates the processor's SQS event to
    mapping = cfn["Resources"]["ProcessorFunctionJobs"]
    props = mapping["Properties"]
    # THEN it feeds the job queue to the processor
    assert props["FunctionName"] == {"Ref": PROCESSOR}
    assert props["EventSourceArn"] == {"Fn::GetAtt": ["JobQueue", "Arn"]}
    # AND partial batch responses count (without it, failed messages would be deleted)
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # AND batch size and batching window are the parameters, 10 and 5 s by default
    assert props["BatchSize"] == {"Ref": "ProcessorBatchSize"}
    assert props["MaximumBatchingWindowInSeconds"] == {"Ref": "ProcessorBatchingWindowSeconds"}
    assert parameter_default("ProcessorBatchSize") == 10
    assert parameter_default("ProcessorBatchingWindowSeconds") == 5
    # AND any accepted batch size is valid with any accepted window (above 10 needs >= 1 s)
    assert template["Parameters"]["ProcessorBatchSize"]["MaxValue"] <= 10


def test_processor_timeout_is_the_parameter_the_queue_visibility_covers(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the processor's timeout and the job queue's visibility timeout
    timeout = cfn["Resources"][PROCESSOR]["Properties"]["Timeout"]
    visibility = int(cfn["Resources"]["JobQueue"]["Properties"]["VisibilityTimeout"])
    parameter = template["Parameters"]["ProcessorTimeoutSeconds"]
    # THEN the timeout is ProcessorTimeoutSeconds
    assert timeout == {"Ref": "ProcessorTimeoutSeconds"}
    # AND the queue hides a message for at least 6 of them, at the default and at the maximum
    assert visibility >= 6 * int(parameter["Default"])
    assert visibility >= 6 * int(parameter["MaxValue"])


def test_lease_seconds_outlasts_processor_timeout_and_ends_before_redelivery(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the lease and processor timeout parameters, and the queue's visibility timeout
    lease = template["Parameters"]["LeaseSeconds"]
    timeout = template["Parameters"]["ProcessorTimeoutSeconds"]
    visibility = int(cfn["Resources"]["JobQueue"]["Properties"]["VisibilityTimeout"])
    # THEN by default a lease outlives the invocation holding it
    assert parameter_default("LeaseSeconds") > parameter_default("ProcessorTimeoutSeconds")
    # AND for every value both parameters accept (Rules cannot compare numbers; bounds can)
    assert int(lease["MinValue"]) > int(timeout["MaxValue"])
    # AND a crashed invocation's lease has expired when SQS redelivers its message
    assert int(lease["MaxValue"]) <= visibility


def test_reconciler_schedule_rule_uses_the_parameter_expression(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the one EventBridge rule, SAM's translation of the reconciler's Schedule event
    rule_id, rule = only_resource(cfn, "AWS::Events::Rule")
    # THEN it runs on ReconcileSchedule, every minute by default, and targets the reconciler
    assert rule["Properties"]["ScheduleExpression"] == {"Ref": "ReconcileSchedule"}
    assert parameter_default("ReconcileSchedule") == "rate(1 minute)"
    pattern = template["Parameters"]["ReconcileSchedule"]["AllowedPattern"]
    assert re.fullmatch(pattern, "rate(10 minutes)")
    assert not re.fullmatch(pattern, "every 10 minutes")
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [RECONCILER, "Arn"]}
    assert rule["Properties"].get("State", "ENABLED") == "ENABLED"
    # AND only that rule may invoke the reconciler
    [permission] = [
        p["Properties"]
        for p in resources_of_type(cfn, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Ref": RECONCILER}
    ]
    assert permission["Principal"] == "events.amazonaws.com"
    assert permission["SourceArn"] == {"Fn::GetAtt": [rule_id, "Arn"]}


def test_reconciler_runs_alone_and_ends_before_the_next_scheduled_run(cfn: dict[str, Any]) -> None:
    # GIVEN the translated reconciler
    props = cfn["Resources"][RECONCILER]["Properties"]
    # THEN one instance at most (two would race on the watermark), and a run is over before
    # the default schedule fires the next (else that one is throttled, not run)
    assert props["ReservedConcurrentExecutions"] == 1
    assert props["Timeout"] <= _rate_seconds(parameter_default("ReconcileSchedule"))


@pytest.mark.parametrize("function", FUNCTIONS)
def test_function_log_group_keeps_30_days(cfn: dict[str, Any], function: str) -> None:
    # GIVEN the log groups
    groups = [
        group
        for group in resources_of_type(cfn, "AWS::Logs::LogGroup").values()
        if group["Properties"]["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/${{{function}}}"}
    ]
    # THEN the function's own log group exists, keeps 30 days, and goes with the stack
    assert len(groups) == 1
    assert groups[0]["Properties"]["RetentionInDays"] == 30
    assert groups[0]["DeletionPolicy"] == "Delete"


# --- roles ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "grants", "managed"),
    [
        (PROCESSOR, PROCESSOR_GRANTS, [BASIC_EXECUTION, XRAY_WRITE, SQS_EVENT_POLICY]),
        (RECONCILER, RECONCILER_GRANTS, [BASIC_EXECUTION, XRAY_WRITE]),
        (SUBMITTER, SUBMITTER_GRANTS, [BASIC_EXECUTION, XRAY_WRITE, SQS_EVENT_POLICY]),
    ],
)
def test_function_role_grants_exactly_the_listed_actions_and_resources(
    cfn: dict[str, Any],
    function: str,
    grants: dict[str, set[str]],
    managed: list[str],
) -> None:
    # GIVEN the role SAM generated for the function
    _, role = function_role(cfn, function)
    # THEN its inline policies allow exactly these actions, each on exactly these resources
    assert _grants(role) == grants
    # AND the managed policies are the basic execution role and the X-Ray writes, plus what SAM
    # adds for an SQS event
    assert _managed_policies(role) == managed


def test_processor_role_fences_the_sqs_event_policy_to_the_job_queue(cfn: dict[str, Any]) -> None:
    # GIVEN the processor's role, which SAM gives the SQS event's managed policy (Resource "*")
    _, role = function_role(cfn, PROCESSOR)
    assert SQS_EVENT_POLICY in _managed_policies(role)
    # THEN an explicit deny takes every SQS action of that policy away from any other queue
    [deny] = [s for s in role_statements(role) if s["Effect"] == "Deny"]
    assert set(as_list(deny["Action"])) == SQS_EVENT_POLICY_ACTIONS
    assert "Resource" not in deny
    assert deny["NotResource"] == {"Fn::GetAtt": ["JobQueue", "Arn"]}
    # AND no other role carries that managed policy
    for function in (RECEIVER, RECONCILER):
        assert SQS_EVENT_POLICY not in _managed_policies(function_role(cfn, function)[1])


def test_submitter_role_polls_only_the_submissions_queue_and_lists_only_run_files(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the submitter's role, which SAM gives the SQS event's managed policy (every queue)
    _, role = function_role(cfn, SUBMITTER)
    # THEN an explicit deny takes its SQS actions away from any queue but the submissions one
    [deny] = [s for s in role_statements(role) if s["Effect"] == "Deny"]
    assert set(as_list(deny["Action"])) == SQS_EVENT_POLICY_ACTIONS
    assert deny["NotResource"] == {"Fn::GetAtt": ["SubmissionsQueue", "Arn"]}
    # AND the bucket's listing is granted under submissions/ only
    [listing] = [s for s in role_statements(role) if "s3:ListBucket" in as_list(s["Action"])]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": "submissions/*"}}


def test_run_file_uploads_reach_the_submitter_through_its_queue(cfn: dict[str, Any]) -> None:
    # GIVEN the results bucket's notifications and the submitter's event source
    bucket = cfn["Resources"]["ResultsBucket"]
    [queue] = bucket["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    mapping = cfn["Resources"]["SubmitterFunctionSubmissions"]["Properties"]
    # THEN an upload of submissions/*.txt goes to the submissions queue, S3 allowed to send it
    assert queue["Queue"] == {"Fn::GetAtt": ["SubmissionsQueue", "Arn"]}
    rules = {r["Name"]: r["Value"] for r in queue["Filter"]["S3Key"]["Rules"]}
    assert rules == {"prefix": "submissions/", "suffix": ".txt"}
    assert bucket["DependsOn"] == "SubmissionsQueuePolicy"
    [grant] = cfn["Resources"]["SubmissionsQueuePolicy"]["Properties"]["PolicyDocument"][
        "Statement"
    ]
    assert grant["Principal"] == {"Service": "s3.amazonaws.com"}
    assert grant["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    # AND the queue invokes the submitter one message at a time, partial failures counted
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["SubmissionsQueue", "Arn"]}
    assert mapping["FunctionName"] == {"Ref": SUBMITTER}
    assert mapping["BatchSize"] == 1
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_a_killed_submitters_message_comes_back_after_its_leases_ran_out(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    from scrape_pipeline.runs.inside import InsideSettings

    # GIVEN the submissions queue's visibility timeout and the submitter's bounds
    visibility = cfn["Resources"]["SubmissionsQueue"]["Properties"]["VisibilityTimeout"]
    timeout = template["Parameters"]["SubmitterTimeoutSeconds"]
    settings = InsideSettings(queue_url="unused")
    # THEN it outlasts any accepted timeout and the posting lease, and the margin fits in one
    assert visibility > timeout["MaxValue"]
    assert visibility > settings.lease_s
    assert settings.margin_s < timeout["MinValue"]
    assert cfn["Resources"][SUBMITTER]["Properties"]["Timeout"] == {
        "Ref": "SubmitterTimeoutSeconds"
    }


def test_roles_name_no_wildcard_resource_or_action_for_data_services(cfn: dict[str, Any]) -> None:
    # GIVEN every role in the stack (the functions' and any SAM added)
    roles = resources_of_type(cfn, "AWS::IAM::Role")
    assert {function_role(cfn, f)[0] for f in FUNCTIONS} <= set(roles)
    checked = 0
    for name, role in roles.items():
        for statement in role_statements(role):
            actions = as_list(statement.get("Action", []))
            if not {a.split(":")[0] for a in actions} & GUARDED_SERVICES:
                continue
            checked += 1
            # THEN no DynamoDB, S3, SQS or Secrets Manager action is a whole-service wildcard
            assert not [a for a in actions if a == "*" or a.endswith(":*")], (name, statement)
            # AND every resource is one of this stack's, by intrinsic, never a literal ARN or "*"
            for resource in as_list(statement.get("Resource", statement.get("NotResource"))):
                assert isinstance(resource, dict), f"{name}: literal resource {resource!r}"
                assert not _reach(resource).startswith("*"), (name, statement)
    assert checked >= 10


@pytest.mark.parametrize(
    ("function", "readable", "unreadable"),
    [
        (RECEIVER, WEBHOOK_SECRET, GEONODE_KEY),
        (PROCESSOR, GEONODE_KEY, WEBHOOK_SECRET),
        (RECONCILER, GEONODE_KEY, WEBHOOK_SECRET),
        (SUBMITTER, GEONODE_KEY, WEBHOOK_SECRET),
    ],
)
def test_function_reads_only_its_own_secret(
    cfn: dict[str, Any], function: str, readable: str, unreadable: str
) -> None:
    # GIVEN the function role's Secrets Manager statements
    _, role = function_role(cfn, function)
    statements = [
        s
        for s in role_statements(role)
        if any(a.startswith("secretsmanager:") for a in as_list(s["Action"]))
    ]
    # THEN they read its own secret
    assert [s["Effect"] for s in statements] == ["Allow"]
    assert [set(as_list(s["Action"])) for s in statements] == [{"secretsmanager:GetSecretValue"}]
    assert readable in references(statements[0]["Resource"])
    # AND never the other one (the webhook secret is rotated from the CLI, not by a function)
    assert unreadable not in references(statements)
    # AND no managed policy reaches Secrets Manager
    assert not [p for p in _managed_policies(role) if "Secret" in p]


# --- results bucket -------------------------------------------------------------------------


def test_results_bucket_versioned_encrypted_private_and_retained(cfn: dict[str, Any]) -> None:
    # GIVEN the results bucket
    bucket = cfn["Resources"]["ResultsBucket"]
    props = bucket["Properties"]
    # THEN it keeps versions (a second write of one key shows as a second version)
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    # AND encrypts with S3-managed keys and a bucket key
    [rule] = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert rule["BucketKeyEnabled"] is True
    # AND blocks every form of public access, with ACLs disabled
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    # AND outlives the stack (results are the product)
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["UpdateReplacePolicy"] == "Retain"


def test_results_bucket_policy_denies_every_request_without_tls(cfn: dict[str, Any]) -> None:
    # GIVEN the one bucket policy
    _, policy = only_resource(cfn, "AWS::S3::BucketPolicy")
    props = policy["Properties"]
    # THEN it is the results bucket's
    assert props["Bucket"] == {"Ref": "ResultsBucket"}
    [statement] = as_list(props["PolicyDocument"]["Statement"])
    # AND denies everyone every S3 action on the bucket and its objects over plain HTTP
    assert statement["Effect"] == "Deny"
    assert statement["Principal"] == "*"
    assert statement["Action"] in ("s3:*", ["s3:*"])
    assert {_reach(r) for r in as_list(statement["Resource"])} == {
        "ResultsBucket",
        RESULTS_OBJECTS,
    }
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_geonode_api_key_secret_is_a_generated_placeholder(cfn: dict[str, Any]) -> None:
    # GIVEN the Geonode API key secret
    props = cfn["Resources"][GEONODE_KEY]["Properties"]
    # THEN its first value is random; the operator stores the real key, never the repository
    assert "SecretString" not in props
    assert props["GenerateSecretString"] == {"PasswordLength": 48, "ExcludePunctuation": True}


# --- alarms ---------------------------------------------------------------------------------


def test_processor_errors_alarm_sums_the_functions_errors_over_5_minutes(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the processor errors alarm
    alarm = cfn["Resources"]["ProcessorErrorsAlarm"]["Properties"]
    # THEN it sums the processor's Lambda Errors over 5 minutes against a parameter threshold
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", "Errors")
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": PROCESSOR}}]
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Sum", 300, 1)
    assert alarm["Threshold"] == {"Ref": "ProcessorErrorsAlarmThreshold"}
    assert parameter_default("ProcessorErrorsAlarmThreshold") == 1
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_reconciler_recoveries_alarm_sums_the_run_total_per_full_sweep_window(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the recoveries alarm, the reconciler's Powertools settings and its full-sweep cadence
    alarm = cfn["Resources"]["ReconcilerRecoveriesAlarm"]["Properties"]
    env = _env(cfn, RECONCILER)
    window = parameter_default("ReconcileFullSweepSeconds")
    assert window % _rate_seconds(parameter_default("ReconcileSchedule")) == 0
    # THEN it reads the run's JobsRecovered total where Powertools writes it: the namespace and
    # the service dimension alone (CloudWatch matches dimension sets exactly; the per-source
    # series carry `source` too)
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        env["POWERTOOLS_METRICS_NAMESPACE"],
        "JobsRecovered",
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]
    # AND sums one window in which every sweep ran, against a parameter threshold
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Sum", window, 1)
    assert alarm["Threshold"] == {"Ref": "RecoveriesAlarmThreshold"}
    assert parameter_default("RecoveriesAlarmThreshold") == 10
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_sick_jobs_alarm_counts_the_processors_parked_jobs_per_hour(cfn: dict[str, Any]) -> None:
    # GIVEN the sick-jobs alarm and the processor's Powertools settings
    alarm = cfn["Resources"]["SickJobsAlarm"]["Properties"]
    env = _env(cfn, PROCESSOR)
    # THEN it reads the metric the processor emits when it parks a job whose calls keep
    # failing, where Powertools writes it (namespace, service dimension alone)
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        env["POWERTOOLS_METRICS_NAMESPACE"],
        importlib.import_module(
            "scrape_pipeline.processor.disposition"
        ).MessageOutcome.PARKED.metric,
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]
    # AND any parked job in an hour (a sick job's slowest poll) raises it
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Sum", 3600, 1)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["TreatMissingData"] == "notBreaching"


def _reconciler_metric() -> Any:
    return importlib.import_module("scrape_pipeline.reconciler.report").ReconcilerMetric


def _reconciler_alarm(cfn: dict[str, Any], alarm_id: str, metric: str) -> dict[str, Any]:
    """A reconciler alarm's properties, checked to read ``metric`` where Powertools writes the
    run's series: the namespace and the service dimension alone."""
    alarm: dict[str, Any] = cfn["Resources"][alarm_id]["Properties"]
    env = _env(cfn, RECONCILER)
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        env["POWERTOOLS_METRICS_NAMESPACE"],
        metric,
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]
    return alarm


def test_sweep_failed_alarm_fires_after_n_failing_runs_in_a_row(cfn: dict[str, Any]) -> None:
    # GIVEN the failed-sweep alarm and the reconciler's schedule
    metric = _reconciler_metric().SWEEP_FAILED
    alarm = _reconciler_alarm(cfn, "ReconcileSweepFailedAlarm", metric)
    run_seconds = _rate_seconds(parameter_default("ReconcileSchedule"))
    # THEN a period holds one run, and N periods in a row (a parameter, 3) must each see one
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", run_seconds)
    runs = {"Ref": "ReconcileSweepFailedRuns"}
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (runs, runs)
    assert parameter_default("ReconcileSweepFailedRuns") == 3
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    # AND a minute without a run is not a failure (the heartbeat alarm has those)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_heartbeat_alarm_fires_when_no_run_completes_for_a_few_schedule_periods(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the heartbeat alarm and the reconciler's schedule
    alarm = _reconciler_alarm(cfn, "ReconcilerHeartbeatAlarm", _reconciler_metric().RUN_COMPLETED)
    minutes = {"Ref": "ReconcilerHeartbeatMinutes"}
    # THEN every minute of the last N (a parameter) must have had no completed run
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 60)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (minutes, minutes)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "LessThanThreshold")
    # AND N minutes are a few schedule periods (not one late run), and no data is the alarm
    window = parameter_default("ReconcilerHeartbeatMinutes") * 60
    assert window >= 3 * _rate_seconds(parameter_default("ReconcileSchedule"))
    assert alarm["TreatMissingData"] == "breaching"


def test_oldest_unsettled_alarm_fires_above_a_lost_messages_longest_wait(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the lag alarm
    alarm = _reconciler_alarm(cfn, "OldestUnsettledAlarm", _reconciler_metric().OLDEST_UNSETTLED)
    # THEN it takes the largest age over five minutes against a parameter threshold
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Maximum", 300, 1)
    assert alarm["Threshold"] == {"Ref": "OldestUnsettledAlarmSeconds"}
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    # AND the default is above what a healthy pipeline shows: a lost message waits STALE_AFTER,
    # then up to one full-sweep period for the stuck-rows sweep
    longest_healthy_wait = parameter_default("StaleAfterSeconds") + parameter_default(
        "ReconcileFullSweepSeconds"
    )
    assert parameter_default("OldestUnsettledAlarmSeconds") > longest_healthy_wait
    assert alarm["TreatMissingData"] == "notBreaching"


def test_reconciler_alarms_name_only_metrics_the_reconciler_emits(cfn: dict[str, Any]) -> None:
    # GIVEN every alarm on the reconciler's service
    names = {
        alarm["Properties"]["MetricName"]
        for alarm in resources_of_type(cfn, "AWS::CloudWatch::Alarm").values()
        if {"Name": "service", "Value": "reconciler"} in alarm["Properties"].get("Dimensions", [])
    }
    # THEN each is one of the reconciler's metric names, and the run's health is all watched
    metric = _reconciler_metric()
    assert names <= set(metric)
    assert {metric.SWEEP_FAILED, metric.RUN_COMPLETED, metric.OLDEST_UNSETTLED} <= names


def _runbook_alarm_rows() -> dict[str, list[str]]:
    """The runbook's table of the reconciler's alarms (docs/operations.md): alarm -> cells."""
    rows = {}
    for line in OPERATIONS.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0].endswith("Alarm`"):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_runbook_states_each_reconciler_alarms_metric_period_and_trigger(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the reconciler's alarms as translated, and the runbook's table of them
    alarms = {
        name: alarm["Properties"]
        for name, alarm in resources_of_type(cfn, "AWS::CloudWatch::Alarm").items()
        if {"Name": "service", "Value": "reconciler"} in alarm["Properties"]["Dimensions"]
    }
    rows = _runbook_alarm_rows()
    # THEN the table has every one of them, and nothing else
    assert set(rows) == set(alarms)
    for name, alarm in alarms.items():
        metric, period, fires = rows[name]
        # AND states its metric, its statistic and period as deployed
        assert metric == f"`{alarm['MetricName']}`", name
        assert period == f"{alarm['Statistic']}, {alarm['Period']} s", name
        # AND names each parameter it is tuned by, with the parameter's default
        for value in (alarm["Threshold"], alarm["EvaluationPeriods"]):
            if isinstance(value, dict):
                parameter = value["Ref"]
                assert f"`{parameter}` ({parameter_default(parameter)})" in fires, name
            elif value != 1:
                assert str(value) in fires, name
        # AND says "in a row" exactly when it takes several periods
        several = alarm["EvaluationPeriods"] != 1
        assert ("periods in a row" in fires) is several, name
        assert ("in one period" in fires) is not several, name


# --- dashboard ------------------------------------------------------------------------------


def test_dashboard_body_is_json_after_substitution(cfn: dict[str, Any]) -> None:
    # GIVEN the dashboard's !Sub body
    body, variables = _dashboard_body(cfn)
    assert variables
    # WHEN every ${...} is replaced by a stand-in value
    parsed = _substituted(body)
    # THEN it parses as a dashboard of metric widgets
    assert isinstance(parsed, dict)
    assert parsed["widgets"]
    for widget in parsed["widgets"]:
        assert widget["type"] == "metric"
        assert widget["properties"]["region"] == "<AWS::Region>"
        assert widget["properties"]["metrics"]
    # AND every variable names a parameter, a resource (or its attribute) or a pseudo parameter
    for variable in variables:
        name = variable.split(".")[0]
        known = name in cfn["Parameters"] or name in cfn["Resources"]
        assert known or variable in PSEUDO_PARAMETERS, f"unknown ${{{variable}}}"


def test_dashboard_shows_every_pipeline_metric(cfn: dict[str, Any]) -> None:
    # GIVEN every line the dashboard draws, and the services the functions report as
    widgets = _substituted(_dashboard_body(cfn)[0])["widgets"]
    drawn = set().union(*(_series(widget) for widget in widgets))
    service = {f: _env(cfn, f)["POWERTOOLS_SERVICE_NAME"] for f in FUNCTIONS}
    namespace = _env(cfn, RECEIVER)["POWERTOOLS_METRICS_NAMESPACE"]

    def custom(name: str, function: str, **dims: str) -> tuple[str, str, frozenset[Any]]:
        return namespace, name, frozenset({("service", service[function]), *dims.items()})

    expected = {
        # every webhook outcome the receiver counts
        *(
            custom(name, RECEIVER)
            for name in _outcome_metrics("receiver.webhook", "WebhookOutcome")
        ),
        # every processor outcome: the six the pipeline is judged by, and the rest it counts
        *(custom(name, PROCESSOR) for name in PROCESSOR_METRICS),
        *(
            custom(name, PROCESSOR)
            for name in _outcome_metrics("processor.disposition", "MessageOutcome")
        ),
        # a batch's or crawl's items resubmitted as extract jobs
        custom(
            importlib.import_module("scrape_pipeline.processor.disposition").ITEMS_RETRIED_METRIC,
            PROCESSOR,
        ),
        # recoveries by source: the measured webhook gap, per source the reconciler names
        *(custom("JobsRecovered", RECONCILER, source=s) for s in RECOVERY_SOURCES),
        *(
            custom("JobsRecovered", RECONCILER, source=s)
            # the sweeps that recover jobs (the outbox sweep recovers events: no such series)
            for s in (
                row.name
                for row in importlib.import_module("scrape_pipeline.reconciler.run").SWEEP_TABLE
                if row.sweep.recovers
            )
        ),
        # the reconciler's health: completed runs, failed sweeps (all, by sweep), its lag
        *(
            custom(m, RECONCILER)
            for m in ("ReconcilerRunCompleted", "ReconcileSweepFailed", "OldestUnsettledSeconds")
        ),
        *(
            custom("ReconcileSweepFailed", RECONCILER, sweep=s)
            for s in importlib.import_module("scrape_pipeline.reconciler.run").SWEEPS
        ),
        # queue depth, dead-letter queue depth
        *(
            ("AWS/SQS", "ApproximateNumberOfMessagesVisible", frozenset({("QueueName", q)}))
            for q in ("<JobQueue.QueueName>", "<JobDeadLetterQueue.QueueName>")
        ),
        # errors and duration of the functions
        *(
            ("AWS/Lambda", metric, frozenset({("FunctionName", f"<{function}>")}))
            for metric in ("Errors", "Duration")
            for function in FUNCTIONS
        ),
        # the webhook API's client and server errors (ApiName is the stack name, as the REST
        # API's OpenAPI title)
        *(
            (
                "AWS/ApiGateway",
                metric,
                frozenset({("ApiName", "<AWS::StackName>"), ("Stage", "<StageName>")}),
            )
            for metric in ("4XXError", "5XXError")
        ),
    }
    # THEN each one is drawn
    assert sorted(map(str, expected - drawn)) == []
    assert {"WebhookAccepted", "WebhookRecovered", "ReceiverUnavailable", "JobsStored"} <= {
        name for _, name, _ in drawn
    }
    _, api = only_resource(cfn, "AWS::ApiGateway::RestApi")
    assert api["Properties"]["Body"]["info"]["title"] == {"Ref": "AWS::StackName"}


def test_dashboard_is_named_after_the_stack(cfn: dict[str, Any]) -> None:
    # GIVEN the dashboard
    _, dashboard = only_resource(cfn, "AWS::CloudWatch::Dashboard")
    # THEN two stacks (default, prod) in one account get two dashboards
    assert dashboard["Properties"]["DashboardName"] == {"Fn::Sub": "${AWS::StackName}-pipeline"}
