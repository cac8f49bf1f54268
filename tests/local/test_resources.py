"""Local ``translate``, ``resolve``, ``create``, ``settings``: the stack's AWS resources,
from template.yaml as SAM translates it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scrape_pipeline_local.create import StackResources, create_all, create_queues, create_resources
from scrape_pipeline_local.resolve import Resolver
from scrape_pipeline_local.settings import local_settings, schedule_seconds
from scrape_pipeline_local.translate import (
    QUEUE,
    TemplateError,
    parameter_default,
    properties,
    template,
    translate,
)

PREFIX = "scrape-pipeline"
API_KEY = "geonode-key-for-tests"


@pytest.fixture
def session() -> Iterator[Any]:
    """A boto3 session inside moto (the suite's offline_aws fixture set the region and keys)."""
    with mock_aws():
        yield boto3.session.Session()


@pytest.fixture
def stack(session: Any) -> StackResources:
    return create_all(session, prefix=PREFIX, api_key=API_KEY)


def template_copy(tmp_path: Path, extra_resources: dict[str, Any]) -> Path:
    """template.yaml as JSON (YAML reads it) with more resources."""
    copy = json.loads(json.dumps(template()))
    copy["Resources"].update(extra_resources)
    path = tmp_path / "template.json"
    path.write_text(json.dumps(copy))
    return path


# -- translation ----------------------------------------------------------------------------


def test_translation_runs_offline_and_holds_the_cloudformation_types(monkeypatch):
    # Nothing answers here: a network call would fail the translation.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    translation = translate()
    types = {resource["Type"] for resource in translation["Resources"].values()}

    assert not {t for t in types if t.startswith("AWS::Serverless::")}
    assert {
        "AWS::DynamoDB::Table",
        "AWS::SQS::Queue",
        "AWS::S3::Bucket",
        "AWS::SecretsManager::Secret",
        "AWS::Lambda::Function",
        "AWS::IAM::Role",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Events::Rule",
        "AWS::ApiGateway::RestApi",
        "AWS::CloudWatch::Alarm",
    } <= types


def test_translation_is_a_copy_each_time():
    first = translate()
    first["Resources"].clear()
    assert translate()["Resources"]


def test_a_managed_policy_the_translator_does_not_know_fails_the_translation(tmp_path):
    function = json.loads(json.dumps(template()["Resources"]["ReceiverFunction"]))
    function["Properties"]["Policies"] = ["NoSuchManagedPolicyAnywhere"]
    del function["Properties"]["Events"]
    path = template_copy(tmp_path, {"OtherFunction": function})

    with pytest.raises(TemplateError, match="managed policy"):
        translate(path)


# -- creating resources in moto -------------------------------------------------------------


def test_one_table_with_the_templates_keys_index_and_ttl(session, stack):
    dynamodb = session.client("dynamodb")
    props = properties("LedgerTable")

    assert dynamodb.list_tables()["TableNames"] == [stack.table]
    assert stack.table == "scrape-pipeline-ledgertable"
    table = dynamodb.describe_table(TableName=stack.table)["Table"]
    assert table["KeySchema"] == props["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=str) == sorted(
        props["AttributeDefinitions"], key=str
    )
    assert table["BillingModeSummary"]["BillingMode"] == props["BillingMode"]
    indexes = {index["IndexName"]: index for index in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"pending-by-state", "outbox-by-time"}
    for index in props["GlobalSecondaryIndexes"]:
        assert indexes[index["IndexName"]]["KeySchema"] == index["KeySchema"]
    ttl = dynamodb.describe_time_to_live(TableName=stack.table)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}


def test_the_job_queue_redrives_to_its_dlq_as_the_template_says(session, stack):
    sqs = session.client("sqs")
    queues = {p.ref for p in stack.created.values() if p.type == QUEUE}
    assert {stack.queue_url, stack.dlq_url} < queues == set(sqs.list_queues()["QueueUrls"])

    queue = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])
    dlq = sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["All"])
    redrive = json.loads(queue["Attributes"]["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq["Attributes"]["QueueArn"]
    assert int(redrive["maxReceiveCount"]) == parameter_default("MaxReceiveCount") == 5
    assert (
        int(queue["Attributes"]["VisibilityTimeout"]) == properties("JobQueue")["VisibilityTimeout"]
    )
    assert int(queue["Attributes"]["MessageRetentionPeriod"]) == 345600
    assert int(dlq["Attributes"]["MessageRetentionPeriod"]) == 1209600
    # The redrive target is created first.
    order = list(stack.created)
    assert order.index("JobDeadLetterQueue") < order.index("JobQueue")


def test_the_results_bucket_is_versioned(session, stack):
    s3 = session.client("s3")
    assert [bucket["Name"] for bucket in s3.list_buckets()["Buckets"]] == [stack.bucket]
    assert s3.get_bucket_versioning(Bucket=stack.bucket)["Status"] == "Enabled"


def test_run_file_uploads_notify_the_submissions_queue(session, stack):
    # GIVEN the bucket's notifications, THEN a submissions/*.txt upload goes to the queue the
    # submitter function reads (moto then sends it there itself, as S3 does)
    s3 = session.client("s3")
    config = s3.get_bucket_notification_configuration(Bucket=stack.bucket)
    [queue] = config["QueueConfigurations"]
    assert queue["QueueArn"] == stack.created["SubmissionsQueue"].attributes["Arn"]
    assert queue["Events"] == ["s3:ObjectCreated:*"]
    rules = {r["Name"].lower(): r["Value"] for r in queue["Filter"]["Key"]["FilterRules"]}
    assert rules == {"prefix": "submissions/", "suffix": ".txt"}


def test_both_secrets_exist_and_the_api_key_is_stored(session, stack):
    sm = session.client("secretsmanager")
    names = {secret["ARN"] for secret in sm.list_secrets()["SecretList"]}
    assert names == {stack.webhook_secret_arn, stack.api_key_secret_arn}

    assert sm.get_secret_value(SecretId=stack.api_key_secret_arn)["SecretString"] == API_KEY
    placeholder = sm.get_secret_value(SecretId=stack.webhook_secret_arn)["SecretString"]
    spec = properties("WebhookSecret")["GenerateSecretString"]
    assert len(placeholder) == spec["PasswordLength"]
    assert placeholder.isalnum()  # ExcludePunctuation


def test_without_an_api_key_the_key_secret_gets_a_generated_placeholder(session):
    created = create_all(session, prefix="other")
    sm = session.client("secretsmanager")
    value = sm.get_secret_value(SecretId=created.api_key_secret_arn)["SecretString"]
    assert len(value) == 48


def test_everything_moto_does_not_hold_for_us_is_skipped_and_listed(stack):
    skipped = {entry.logical_id: entry.type for entry in stack.skipped}
    for function in ("ReceiverFunction", "ProcessorFunction", "ReconcilerFunction"):
        assert skipped[function] == "AWS::Lambda::Function"
    assert skipped["WebhookApi"] == "AWS::ApiGateway::RestApi"
    assert skipped["ProcessorFunctionJobs"] == "AWS::Lambda::EventSourceMapping"
    assert skipped["ReconcilerFunctionReconcile"] == "AWS::Events::Rule"
    alarms = {name for name, type_ in skipped.items() if type_ == "AWS::CloudWatch::Alarm"}
    assert alarms >= {"JobDeadLetterQueueDepthAlarm", "ProcessorErrorsAlarm"}
    assert skipped["PipelineDashboard"] == "AWS::CloudWatch::Dashboard"
    # Created and skipped together are the whole translation.
    assert set(stack.created) | set(skipped) == set(translate()["Resources"])
    assert not set(stack.created) & set(skipped)


def test_the_environment_keeps_its_shape(stack):
    assert stack.environment() == {
        "LEDGER_TABLE_NAME": stack.table,
        "QUEUE_URL": stack.queue_url,
        "RESULTS_BUCKET": stack.bucket,
        "WEBHOOK_SECRET_ID": stack.webhook_secret_arn,
        "GEONODE_API_KEY_SECRET_ID": stack.api_key_secret_arn,
        "MAX_RECEIVE_COUNT": "5",
        "EVENT_BUS_NAME": "scrape-pipeline-events",
    }


def test_the_stacks_event_bus_is_created_in_moto(session, stack):
    buses = {bus["Name"] for bus in session.client("events").list_event_buses()["EventBuses"]}
    assert stack.event_bus in buses


def test_an_extra_queue_in_the_template_becomes_an_extra_queue(session, tmp_path):
    path = template_copy(
        tmp_path,
        {
            "AuditQueue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"VisibilityTimeout": {"Ref": "ProcessorTimeoutSeconds"}},
            }
        },
    )

    created = create_all(session, prefix=PREFIX, template_path=path)

    sqs = session.client("sqs")
    urls = sqs.list_queues()["QueueUrls"]
    assert len(urls) == 5
    extra = created.created["AuditQueue"].ref
    assert extra in urls and extra.endswith("/scrape-pipeline-auditqueue")
    attributes = sqs.get_queue_attributes(QueueUrl=extra, AttributeNames=["VisibilityTimeout"])
    assert attributes["Attributes"]["VisibilityTimeout"] == "60"  # the parameter's default


def test_a_resource_referring_to_a_skipped_one_fails_loudly(session, tmp_path):
    path = template_copy(
        tmp_path,
        {
            "NamedAfterAFunction": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"QueueName": {"Fn::Sub": "${ReceiverFunction}-events"}},
            }
        },
    )
    with pytest.raises(TemplateError, match="NamedAfterAFunction"):
        create_resources(session, translate(path))


def test_the_legacy_helper_still_makes_a_queue_and_its_dlq(session):
    sqs = session.client("sqs")
    queue_url, dlq_url = create_queues(sqs, "jobs")
    assert queue_url.endswith("/jobs") and dlq_url.endswith("/jobs-dlq")
    redrive = json.loads(
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])[
            "Attributes"
        ]["RedrivePolicy"]
    )
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])
    assert redrive["deadLetterTargetArn"] == dlq_arn["Attributes"]["QueueArn"]


# -- what the local stack reads from the functions' wiring ----------------------------------


def test_local_settings_from_the_event_source_and_the_schedule(stack):
    settings = local_settings(translate(), stack)

    assert settings["batch_size"] == 10
    assert settings["batching_window_seconds"] == parameter_default(
        "ProcessorBatchingWindowSeconds"
    )
    assert settings["reconcile_schedule"] == "rate(1 minute)"
    assert settings["reconcile_interval"] == 60
    env = settings["env"]
    assert env["LEDGER_TABLE_NAME"] == stack.table
    assert env["QUEUE_URL"] == stack.queue_url
    assert env["MAX_RECEIVE_COUNT"] == "5"
    assert env["LEASE_SECONDS"] == "120"
    assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
    # One value per function: not in the union, but in each function's own variables.
    assert "POWERTOOLS_SERVICE_NAME" not in env
    assert settings["function_env"]["ProcessorFunction"]["POWERTOOLS_SERVICE_NAME"] == "processor"
    assert "unresolved" not in settings


def test_local_settings_read_each_functions_resolved_timeout():
    settings = local_settings(translate())

    # The processor's is a parameter (resolved to its default), the receiver's the Globals'.
    assert settings["processor_timeout"] == int(parameter_default("ProcessorTimeoutSeconds"))
    assert settings["reconciler_timeout"] == properties("ReconcilerFunction")["Timeout"]
    assert settings["receiver_timeout"] == template()["Globals"]["Function"]["Timeout"]
    assert settings["function_timeouts"] == {
        "ReceiverFunction": settings["receiver_timeout"],
        "ProcessorFunction": settings["processor_timeout"],
        "ReconcilerFunction": settings["reconciler_timeout"],
        "SubmitterFunction": settings["submitter"]["timeout"],
    }
    assert settings["submitter"]["timeout"] == int(parameter_default("SubmitterTimeoutSeconds"))
    assert settings["submitter"]["batch_size"] == 1  # one run per invocation


def test_a_function_without_a_timeout_gets_lambdas_default(tmp_path):
    copy = json.loads(json.dumps(template()))
    del copy["Globals"]["Function"]["Timeout"]
    path = tmp_path / "template.json"
    path.write_text(json.dumps(copy))

    assert local_settings(translate(path))["receiver_timeout"] == 3


def test_local_settings_without_resources_leave_resource_references_out():
    settings = local_settings(translate())
    assert "QUEUE_URL" not in settings["env"]
    assert "QUEUE_URL" in settings["unresolved"]
    assert settings["env"]["SIGNATURE_SCHEME"] == "geonode"


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("rate(1 minute)", 60),
        ("rate(10 minutes)", 600),
        ("rate(2 hours)", 7200),
        ("rate(1 day)", 86400),
    ],
)
def test_rate_expressions_in_seconds(expression, seconds):
    assert schedule_seconds(expression) == seconds


def test_a_cron_schedule_has_no_interval():
    with pytest.raises(ValueError, match="rate"):
        schedule_seconds("cron(0 * * * ? *)")


def test_the_resolver_evaluates_sub_getatt_and_conditions(session, stack):
    resolver = Resolver(translate(), stack.created)
    assert resolver.resolve({"Fn::Sub": "${LedgerTable.Arn}/index/*"}).endswith(
        f":table/{stack.table}/index/*"
    )
    assert resolver.resolve({"Fn::Sub": "${AWS::Region}-${StageName}-${!Literal}"}) == (
        "us-east-1-v1-${Literal}"
    )
    assert resolver.resolve({"Fn::GetAtt": ["JobQueue", "QueueName"]}) == "scrape-pipeline-jobqueue"
    # AlarmTopicArn defaults to "": HasAlarmTopic is false and the action list drops out.
    assert (
        resolver.resolve(
            {
                "A": {
                    "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
                }
            }
        )
        == {}
    )
