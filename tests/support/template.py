"""The SAM template as data, so tests create exactly the resources it declares."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devstack.moto_server import MotoServer

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient
    from types_boto3_secretsmanager.client import SecretsManagerClient
    from types_boto3_sqs.client import SQSClient

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"


@cache
def template() -> dict[str, Any]:
    """template.yaml parsed with CloudFormation's short-form tags (!Ref, !Sub, ...)."""
    from cfnlint.decode import cfn_yaml

    return dict(cfn_yaml.load(str(TEMPLATE)))


def resource(name: str) -> dict[str, Any]:
    """One resource's Properties."""
    return dict(template()["Resources"][name].get("Properties", {}))


def parameter_default(name: str) -> Any:
    """A template parameter's default value."""
    return template()["Parameters"][name].get("Default")


def create_ledger_table(client: DynamoDBClient, table_name: str) -> str:
    """Create the ledger table with the template's key schema, indexes and billing."""
    props = resource("LedgerTable")
    client.create_table(
        TableName=table_name,
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props.get("GlobalSecondaryIndexes", []),
        BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"),
    )
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    return table_name


def create_queues(client: SQSClient, name: str) -> tuple[str, str]:
    """The job queue and its DLQ with the template's visibility timeout and redrive."""
    dlq_url = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    props = resource("JobQueue")
    redrive = props["RedrivePolicy"]
    max_receive = redrive["maxReceiveCount"]
    if isinstance(max_receive, dict):  # !Ref to a parameter
        max_receive = parameter_default(max_receive["Ref"])
    visibility = props["VisibilityTimeout"]
    if isinstance(visibility, dict):
        visibility = parameter_default(visibility["Ref"])
    queue_url = client.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive)}
            ),
        },
    )["QueueUrl"]
    return queue_url, dlq_url


def create_secret(client: SecretsManagerClient, name: str, value: str) -> str:
    """The webhook secret bundle."""
    return client.create_secret(Name=name, SecretString=value)["ARN"]


def moto_server() -> tuple[MotoServer, str]:
    """A moto server on 127.0.0.1 (an ephemeral port); returns (server, endpoint URL)."""
    server = MotoServer().start()
    return server, server.endpoint
