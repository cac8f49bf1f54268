"""The wiring of template.yaml, asserted on the CloudFormation SAM translates it to.

Translation is what CloudFormation deploys, so these assertions hold for the real stack:
what the receiver may do, what the API hands it, how the ledger and the queues are shaped.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from scrape_pipeline_local.resolve import references
from tests.template.helpers import (
    as_list,
    function_environment,
    function_property,
    function_role,
    only_resource,
    parameter_default,
    resources_of_type,
    role_statements,
)

RECEIVER = "ReceiverFunction"
WEBHOOK_ROUTE = "/webhooks/{provider}"
BINARY_MEDIA_EXTENSION = "x-amazon-apigateway-binary-media-types"

# The receiver's whole IAM surface. A new action must be added here on purpose.
RECEIVER_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "sqs:SendMessage*",  # SAM's SQSSendMessagePolicy (IAM authorizes batches as SendMessage)
    "secretsmanager:GetSecretValue",
}
GUARDED_SERVICES = ("dynamodb", "sqs", "secretsmanager")


def _rest_api_body(cfn: dict[str, Any]) -> dict[str, Any]:
    _, api = only_resource(cfn, "AWS::ApiGateway::RestApi")
    body: dict[str, Any] = api["Properties"]["Body"]
    return body


def _alarm(cfn: dict[str, Any], metric_name: str) -> dict[str, Any]:
    matches = [
        alarm["Properties"]
        for alarm in resources_of_type(cfn, "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("MetricName") == metric_name
    ]
    assert len(matches) == 1, f"expected one alarm on {metric_name}, found {len(matches)}"
    alarm: dict[str, Any] = matches[0]
    return alarm


def _dimensions(alarm: dict[str, Any]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}


def test_translation_resolves_no_managed_policy_name(cfn: dict[str, Any]) -> None:
    # GIVEN the template translated with a managed-policy loader that knows no name (the
    # translation fails when the translator needed it: online it would call IAM)
    # THEN every managed policy attached to a role is already an ARN
    for name, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            text = arn if isinstance(arn, str) else arn.get("Fn::Sub", "")
            assert text.startswith("arn:"), f"{name} attaches a policy by name: {arn!r}"


def test_rest_api_binary_media_types_accept_every_type(cfn: dict[str, Any]) -> None:
    # GIVEN the REST API SAM generated
    _, api = only_resource(cfn, "AWS::ApiGateway::RestApi")
    body_types = api["Properties"]["Body"].get(BINARY_MEDIA_EXTENSION, [])
    property_types = api["Properties"].get("BinaryMediaTypes", [])
    # THEN every content type is binary: the body reaches the receiver as exact bytes (base64)
    assert "*/*" in body_types or "*/*" in property_types


def test_webhook_route_post_integrates_receiver(cfn: dict[str, Any]) -> None:
    # GIVEN the REST API's OpenAPI body
    paths = _rest_api_body(cfn)["paths"]
    # THEN the only route is POST /webhooks/{provider}
    assert set(paths) == {WEBHOOK_ROUTE}
    assert set(paths[WEBHOOK_ROUTE]) == {"post"}
    # AND it is a Lambda proxy integration of the receiver
    integration = paths[WEBHOOK_ROUTE]["post"]["x-amazon-apigateway-integration"]
    assert integration["type"] == "aws_proxy"
    assert integration["httpMethod"] == "POST"
    assert f"${{{RECEIVER}.Arn}}" in integration["uri"]["Fn::Sub"]
    # AND API Gateway may invoke the receiver for that route
    permissions = [
        p["Properties"]
        for p in resources_of_type(cfn, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Ref": RECEIVER}
    ]
    assert len(permissions) == 1
    assert permissions[0]["Principal"] == "apigateway.amazonaws.com"
    assert "/POST/webhooks/" in json.dumps(permissions[0]["SourceArn"])


def test_webhook_stage_name_and_throttling_come_from_parameters(cfn: dict[str, Any]) -> None:
    # GIVEN the one stage SAM generated (no extra default stage named "Stage")
    _, stage = only_resource(cfn, "AWS::ApiGateway::Stage")
    for deployment in resources_of_type(cfn, "AWS::ApiGateway::Deployment").values():
        assert "StageName" not in deployment["Properties"]
    # THEN its name is the StageName parameter, v1 by default
    assert stage["Properties"]["StageName"] == {"Ref": "StageName"}
    assert parameter_default("StageName") == "v1"
    # AND every method is throttled by the rate and burst parameters
    [settings] = stage["Properties"]["MethodSettings"]
    assert settings["ResourcePath"] == "/*"
    assert settings["HttpMethod"] == "*"
    assert settings["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}
    assert settings["ThrottlingBurstLimit"] == {"Ref": "ApiThrottlingBurstLimit"}
    assert parameter_default("ApiThrottlingRateLimit") > 0
    assert parameter_default("ApiThrottlingBurstLimit") > 0


def test_job_queue_redrive_targets_dlq_with_parameter_max_receive_count(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the job queue's redrive policy
    redrive = cfn["Resources"]["JobQueue"]["Properties"]["RedrivePolicy"]
    # THEN poison messages go to the dead-letter queue after MaxReceiveCount receives
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["JobDeadLetterQueue", "Arn"]}
    assert redrive["maxReceiveCount"] == {"Ref": "MaxReceiveCount"}
    assert parameter_default("MaxReceiveCount") == 5


def test_job_queue_visibility_timeout_covers_six_processor_timeouts(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the processor's timeout parameter and the queue's visibility timeout
    timeout = template["Parameters"]["ProcessorTimeoutSeconds"]
    visibility = int(cfn["Resources"]["JobQueue"]["Properties"]["VisibilityTimeout"])
    # THEN the queue hides a message for at least 6 processor timeouts (SQS guidance),
    assert parameter_default("ProcessorTimeoutSeconds") == 60
    assert visibility >= 6 * int(timeout["Default"])
    # AND for any value the parameter accepts, not only its default
    assert "MaxValue" in timeout
    assert visibility >= 6 * int(timeout["MaxValue"])


def test_queues_encrypt_with_sqs_managed_keys_and_dlq_keeps_14_days(
    cfn: dict[str, Any],
) -> None:
    # GIVEN the job queue, the submissions queue and their dead-letter queues
    queues = resources_of_type(cfn, "AWS::SQS::Queue")
    assert set(queues) == {
        "JobQueue",
        "JobDeadLetterQueue",
        "SubmissionsQueue",
        "SubmissionsDeadLetterQueue",
    }
    # THEN all encrypt at rest with SQS-managed keys
    for name, queue in queues.items():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True, name
    # AND the DLQ keeps messages 14 days, longer than the job queue does
    for source, dlq in (
        ("JobQueue", "JobDeadLetterQueue"),
        ("SubmissionsQueue", "SubmissionsDeadLetterQueue"),
    ):
        dlq_retention = int(queues[dlq]["Properties"]["MessageRetentionPeriod"])
        retention = int(queues[source]["Properties"].get("MessageRetentionPeriod", 345600))
        assert dlq_retention == 14 * 24 * 3600
        assert retention < dlq_retention


def test_ledger_table_key_ttl_pitr_sse_and_retention(cfn: dict[str, Any]) -> None:
    # GIVEN the ledger table
    table = cfn["Resources"]["LedgerTable"]
    props = table["Properties"]
    # THEN one row per job: partition key pk (S) only, on demand
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert {"AttributeName": "pk", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    # AND rows expire on expires_at
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    # AND it is recoverable, encrypted, and survives stack deletion or replacement
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


def test_ledger_table_pending_index_is_sparse_state_by_age(cfn: dict[str, Any]) -> None:
    # GIVEN the ledger table's secondary indexes
    props = cfn["Resources"]["LedgerTable"]["Properties"]
    index, outbox = props["GlobalSecondaryIndexes"]
    # THEN pending-by-state finds rows by state, oldest first, with the whole row
    assert index["IndexName"] == "pending-by-state"
    assert index["KeySchema"] == [
        {"AttributeName": "pending_state", "KeyType": "HASH"},
        {"AttributeName": "state_since", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "ALL"}
    # AND only key attributes are declared (a row without pending_state is not indexed)
    definitions = {d["AttributeName"]: d["AttributeType"] for d in props["AttributeDefinitions"]}
    assert definitions == {"pk": "S", "pending_state": "S", "state_since": "N", "outbox_at": "N"}
    # AND outbox-by-time holds the rows owing an event (only they carry outbox_at), with it
    assert outbox["IndexName"] == "outbox-by-time"
    assert outbox["KeySchema"] == [{"AttributeName": "outbox_at", "KeyType": "HASH"}]
    assert outbox["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["outbox_event"],
    }


def test_event_bus_is_the_stacks_own_and_named_in_outputs_and_the_emitters_env(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the stack's EventBridge bus
    bus = cfn["Resources"]["EventBus"]
    assert bus["Type"] == "AWS::Events::EventBus"
    # THEN the output EventBusName names it, and the processor and reconciler are given it
    assert template["Outputs"]["EventBusName"]["Value"] == {"Ref": "EventBus"}
    for function in ("ProcessorFunction", "ReconcilerFunction"):
        env = cfn["Resources"][function]["Properties"]["Environment"]["Variables"]
        assert env["EVENT_BUS_NAME"] == {"Ref": "EventBus"}


def test_receiver_role_statements_target_specific_resources(cfn: dict[str, Any]) -> None:
    # GIVEN the receiver's role
    _, role = function_role(cfn, RECEIVER)
    statements = role_statements(role)
    assert statements
    for statement in statements:
        services = {action.split(":")[0] for action in as_list(statement["Action"])}
        resources = as_list(statement["Resource"])
        assert statement["Effect"] == "Allow"
        # THEN no data-plane statement names a wildcard resource
        if services & set(GUARDED_SERVICES):
            assert "*" not in json.dumps(resources), statement
        # AND each service reaches only its own resource of this stack
        for resource in resources:
            assert isinstance(resource, dict), f"literal resource {resource!r}"
            if services == {"dynamodb"}:
                assert resource == {"Fn::GetAtt": ["LedgerTable", "Arn"]}
            elif services == {"sqs"}:
                assert "JobQueue" in references(resource)
            elif services == {"secretsmanager"}:
                assert "WebhookSecret" in references(resource)
            else:
                pytest.fail(f"unexpected statement: {statement}")


def test_receiver_role_actions_are_exactly_the_listed_ones(cfn: dict[str, Any]) -> None:
    # GIVEN every action the receiver's role allows
    _, role = function_role(cfn, RECEIVER)
    actions = {
        action for statement in role_statements(role) for action in as_list(statement["Action"])
    }
    # THEN it is exactly the conditional ledger writes, the send and the secret read
    assert actions == RECEIVER_ACTIONS
    # AND no managed policy widens it: only the basic execution role (CloudWatch Logs) and the
    # X-Ray writes SAM attaches for Tracing (tests/iam justifies each of their actions)
    managed = role["Properties"].get("ManagedPolicyArns", [])
    assert [json.dumps(arn).split(":policy/")[-1].strip('"') for arn in managed] == [
        "service-role/AWSLambdaBasicExecutionRole",
        "AWSXrayWriteOnlyAccess",
    ]


def test_receiver_function_runtime_architecture_handler_and_layer(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the receiver as written and as translated
    props = cfn["Resources"][RECEIVER]["Properties"]
    _, layer = only_resource(cfn, "AWS::Lambda::LayerVersion")
    # THEN it runs app.lambda_handler from functions/receiver/ on python3.12, arm64
    assert function_property(template, RECEIVER, "CodeUri") == "functions/receiver/"
    assert props["Handler"] == "app.lambda_handler"
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    # AND with the shared layer
    layer_ids = [ref["Ref"] for ref in props["Layers"]]
    assert len(layer_ids) == 1
    assert cfn["Resources"][layer_ids[0]] == layer


def test_shared_layer_builds_python312_from_layer_folder(template: dict[str, Any]) -> None:
    # GIVEN the shared layer as written
    layer = template["Resources"]["SharedLayer"]
    # THEN SAM builds layers/shared/ (package scrape_pipeline + requirements.txt) for 3.12
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"] == "layers/shared/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    # AND with the layer's Makefile, which also compiles it (test_sam_build checks the byte code)
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    # AND every function gets it from Globals
    assert template["Globals"]["Function"]["Layers"] == [{"Ref": "SharedLayer"}]


def test_every_function_gets_the_shared_environment(cfn: dict[str, Any]) -> None:
    # GIVEN every translated function
    functions = resources_of_type(cfn, "AWS::Lambda::Function")
    assert set(functions) == {
        RECEIVER,
        "ProcessorFunction",
        "ReconcilerFunction",
        "SubmitterFunction",
    }
    for name, function in functions.items():
        env = function["Properties"]["Environment"]["Variables"]
        # THEN metrics always have a namespace and each function names its service
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "ScrapePipeline", name
        assert isinstance(env["POWERTOOLS_SERVICE_NAME"], str), name
        assert env["POWERTOOLS_SERVICE_NAME"], name
        # AND the stack's resources and shared settings reach it
        assert env["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}, name
        assert env["LEDGER_TABLE_NAME"] == {"Ref": "LedgerTable"}, name
        assert env["LEDGER_TTL_DAYS"] == {"Ref": "LedgerTtlDays"}, name
        assert env["MAX_REOPENS"] == {"Ref": "MaxReopens"}, name
        assert env["QUEUE_URL"] == {"Ref": "JobQueue"}, name
        assert env["WEBHOOK_SECRET_ID"] == {"Ref": "WebhookSecret"}, name
        # (a secret's Ref is its ARN; the role decides which secret a function may read)
        assert env["GEONODE_API_KEY_SECRET_ID"] == {"Ref": "GeonodeApiKeySecret"}, name
        assert env["GEONODE_BASE_URL"] == {"Ref": "GeonodeBaseUrl"}, name
        assert env["RESULTS_BUCKET"] == {"Ref": "ResultsBucket"}, name


@pytest.mark.parametrize(
    ("variable", "parameter", "default"),
    [
        ("POWERTOOLS_LOG_LEVEL", "LogLevel", "INFO"),
        ("LEDGER_TTL_DAYS", "LedgerTtlDays", 90),
        ("SIGNATURE_SCHEME", "SignatureScheme", "geonode"),
        ("SIGNATURE_HEADER", "SignatureHeader", ""),
        ("SIGNATURE_ENCODING", "SignatureEncoding", ""),
        ("SIGNATURE_PREFIX", "SignaturePrefix", ""),
        ("SIGNATURE_TIMESTAMP_HEADER", "SignatureTimestampHeader", ""),
        ("SIGNATURE_TOLERANCE_SECONDS", "SignatureToleranceSeconds", 300),
        ("WEBHOOK_MAX_AGE_SECONDS", "WebhookMaxAgeSeconds", "129600"),
        ("MAX_REOPENS", "MaxReopens", 3),
        ("MAX_BODY_BYTES", "MaxBodyBytes", 4694016),
        ("SECRET_CACHE_SECONDS", "SecretCacheSeconds", 60),
    ],
)
def test_receiver_environment_variable_comes_from_parameter(
    cfn: dict[str, Any], variable: str, parameter: str, default: Any
) -> None:
    # GIVEN the receiver's translated environment
    env = cfn["Resources"][RECEIVER]["Properties"]["Environment"]["Variables"]
    # THEN the variable is the parameter, with the documented default
    assert env[variable] == {"Ref": parameter}
    assert parameter_default(parameter) == default


def test_signature_scheme_allows_the_four_schemes(template: dict[str, Any]) -> None:
    # GIVEN the SignatureScheme parameter
    scheme = template["Parameters"]["SignatureScheme"]
    # THEN exactly the schemes scrape_pipeline.receiver.signatures verifies are accepted
    assert set(scheme["AllowedValues"]) == {"geonode", "standard_webhooks", "stripe", "github"}


def test_receiver_service_name_is_set_on_the_function(template: dict[str, Any]) -> None:
    # GIVEN the receiver's environment as written
    env = function_environment(template, RECEIVER)
    # THEN its service name is a literal (the SignatureRejected alarm's dimension must match)
    assert isinstance(env["POWERTOOLS_SERVICE_NAME"], str)
    assert env["POWERTOOLS_SERVICE_NAME"]


def test_webhook_secret_is_a_generated_placeholder(cfn: dict[str, Any]) -> None:
    # GIVEN the webhook secret
    props = cfn["Resources"]["WebhookSecret"]["Properties"]
    # THEN its first value is random and verifies nothing; no secret is in the repository
    assert "SecretString" not in props
    assert props["GenerateSecretString"] == {"PasswordLength": 48, "ExcludePunctuation": True}


@pytest.mark.parametrize(
    ("alarm_id", "dlq"),
    [
        ("JobDeadLetterQueueDepthAlarm", "JobDeadLetterQueue"),
        ("SubmissionsDeadLetterQueueDepthAlarm", "SubmissionsDeadLetterQueue"),
    ],
)
def test_dlq_depth_alarm_fires_on_any_visible_message(
    cfn: dict[str, Any], alarm_id: str, dlq: str
) -> None:
    # GIVEN the alarm on a dead-letter queue's depth
    alarm = cfn["Resources"][alarm_id]["Properties"]
    # THEN it watches that queue and fires on the first message
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert _dimensions(alarm) == {"QueueName": {"Fn::GetAtt": [dlq, "QueueName"]}}
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_receiver_5xx_alarm_sums_the_webhook_stage_over_5_minutes(cfn: dict[str, Any]) -> None:
    # GIVEN the 5XXError alarm and the REST API's name (SAM's OpenAPI title unless Name is set)
    alarm = _alarm(cfn, "5XXError")
    _, api = only_resource(cfn, "AWS::ApiGateway::RestApi")
    api_name = api["Properties"].get("Name", api["Properties"]["Body"]["info"]["title"])
    # THEN it sums this API's stage over 5 minutes against a parameter threshold
    assert alarm["Namespace"] == "AWS/ApiGateway"
    assert _dimensions(alarm) == {"ApiName": api_name, "Stage": {"Ref": "StageName"}}
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 300)
    assert alarm["Threshold"] == {"Ref": "Receiver5xxAlarmThreshold"}
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_signature_rejected_alarm_watches_the_receivers_metric(cfn: dict[str, Any]) -> None:
    # GIVEN the SignatureRejected alarm and the receiver's Powertools settings
    alarm = _alarm(cfn, "SignatureRejected")
    env = cfn["Resources"][RECEIVER]["Properties"]["Environment"]["Variables"]
    # THEN it reads the metric where Powertools writes it: the namespace, service dimension
    assert alarm["Namespace"] == env["POWERTOOLS_METRICS_NAMESPACE"]
    assert _dimensions(alarm) == {"service": env["POWERTOOLS_SERVICE_NAME"]}
    # AND sums 5 minutes against a parameter threshold
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 300)
    assert alarm["Threshold"] == {"Ref": "SignatureRejectedAlarmThreshold"}
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_alarms_notify_only_when_a_topic_is_given(cfn: dict[str, Any]) -> None:
    # GIVEN the optional AlarmTopicArn parameter and its condition
    assert parameter_default("AlarmTopicArn") == ""
    assert cfn["Conditions"]["HasAlarmTopic"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]
    }
    # THEN every alarm notifies the topic when given, and nobody otherwise
    alarms = resources_of_type(cfn, "AWS::CloudWatch::Alarm")
    assert set(alarms) == {
        "JobDeadLetterQueueDepthAlarm",
        "SubmissionsDeadLetterQueueDepthAlarm",
        "Receiver5xxAlarm",
        "SignatureRejectedAlarm",
        "ProcessorErrorsAlarm",
        "PoisonJobsAlarm",
        "SickJobsAlarm",
        "ReconcilerRecoveriesAlarm",
        "ReconcileSweepFailedAlarm",
        "ReconcilerHeartbeatAlarm",
        "OldestUnsettledAlarm",
    }
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == {
            "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }, name


def test_a_prod_stack_cannot_be_deployed_without_an_alarm_topic(
    cfn: dict[str, Any], template: dict[str, Any]
) -> None:
    # GIVEN the Environment parameter (dev by default) and the template's rules, as deployed
    assert parameter_default("Environment") == "dev"
    assert template["Parameters"]["Environment"]["AllowedValues"] == ["dev", "prod"]
    rule = cfn["Rules"]["ProdAlarmsNotifySomeone"]
    # THEN a prod stack must name a topic: CloudFormation checks this before changing anything
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "Environment"}, "prod"]}
    assert [a["Assert"] for a in rule["Assertions"]] == [
        {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}
    ]
    assert "AlarmTopicArn" in rule["Assertions"][0]["AssertDescription"]
    # AND the topic is empty or an SNS topic ARN, so a placeholder cannot pass for one
    pattern = template["Parameters"]["AlarmTopicArn"]["AllowedPattern"]
    assert re.fullmatch(pattern, "")
    assert re.fullmatch(pattern, "arn:aws:sns:us-east-1:123456789012:scrape-pipeline-alarms")
    assert not re.fullmatch(pattern, "<your topic>")
    assert not re.fullmatch(pattern, "arn:aws:sqs:us-east-1:123456789012:not-a-topic")


def test_outputs_expose_every_resource_the_operator_needs(cfn: dict[str, Any]) -> None:
    # GIVEN the stack's outputs
    outputs = cfn["Outputs"]
    # THEN the operator finds every resource it needs
    assert outputs["WebhookUrl"]["Value"] == {
        "Fn::Sub": "https://${WebhookApi}.execute-api.${AWS::Region}.amazonaws.com"
        "/${StageName}/webhooks/geonode"
    }
    assert outputs["JobQueueUrl"]["Value"] == {"Ref": "JobQueue"}
    assert outputs["JobDeadLetterQueueUrl"]["Value"] == {"Ref": "JobDeadLetterQueue"}
    assert outputs["LedgerTableName"]["Value"] == {"Ref": "LedgerTable"}
    assert outputs["WebhookSecretArn"]["Value"] == {"Ref": "WebhookSecret"}
    # AND the results, the Geonode key, both new functions and the dashboard
    assert outputs["GeonodeApiKeySecretArn"]["Value"] == {"Ref": "GeonodeApiKeySecret"}
    assert outputs["ResultsBucketName"]["Value"] == {"Ref": "ResultsBucket"}
    assert outputs["ProcessorFunctionName"]["Value"] == {"Ref": "ProcessorFunction"}
    assert outputs["ReconcilerFunctionName"]["Value"] == {"Ref": "ReconcilerFunction"}
    assert outputs["DashboardName"]["Value"] == {"Ref": "PipelineDashboard"}
