"""The stack's stateful resources, created in moto from template.yaml's own definitions.

Tables, queues, the bucket and the secrets are plain CloudFormation resources in the template:
their key schemas, indexes, redrive and versioning are read from it, so the local stack and
the tests cannot drift from what ``sam deploy`` creates. (moto's CloudFormation does not
deploy a SAM-translated template: field-notes.md.)
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient
    from types_boto3_s3.client import S3Client
    from types_boto3_secretsmanager.client import SecretsManagerClient
    from types_boto3_sqs.client import SQSClient

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"


@cache
def template(path: Path = TEMPLATE) -> dict[str, Any]:
    """template.yaml parsed with CloudFormation's short-form tags (!Ref, !Sub, ...)."""
    from cfnlint.decode import cfn_yaml

    return dict(cfn_yaml.load(str(path)))


def properties(name: str) -> dict[str, Any]:
    """One resource's Properties."""
    return dict(template()["Resources"][name].get("Properties", {}))


def parameter_default(name: str) -> Any:
    """A template parameter's default value."""
    return template()["Parameters"][name].get("Default")


def resolve(value: Any) -> Any:
    """A property value with ``!Ref Parameter`` replaced by the parameter's default."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return parameter_default(value["Ref"])
    return value


def create_ledger_table(client: DynamoDBClient, table_name: str) -> str:
    """The ledger with the template's key schema, indexes, billing and TTL."""
    props = properties("LedgerTable")
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
    dlq_props = properties("JobDeadLetterQueue")
    dlq_url = client.create_queue(
        QueueName=f"{name}-dlq",
        Attributes={
            "MessageRetentionPeriod": str(resolve(dlq_props.get("MessageRetentionPeriod", 1209600)))
        },
    )["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    props = properties("JobQueue")
    redrive = props["RedrivePolicy"]
    queue_url = client.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(resolve(props["VisibilityTimeout"])),
            "RedrivePolicy": json.dumps(
                {
                    "deadLetterTargetArn": dlq_arn,
                    "maxReceiveCount": str(resolve(redrive["maxReceiveCount"])),
                }
            ),
        },
    )["QueueUrl"]
    return queue_url, dlq_url


def create_results_bucket(client: S3Client, bucket: str) -> str:
    """The results bucket, versioned as the template says (versions count double writes)."""
    props = properties("ResultsBucket")
    client.create_bucket(Bucket=bucket)
    if props.get("VersioningConfiguration", {}).get("Status") == "Enabled":
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def create_secret(client: SecretsManagerClient, name: str, value: str | None = None) -> str:
    """A secret; without a value, a random placeholder like the template's GenerateSecretString."""
    return client.create_secret(Name=name, SecretString=value or secrets.token_urlsafe(36))["ARN"]


@dataclass(frozen=True)
class StackResources:
    """Names and addresses of what ``create_all`` made."""

    table: str
    queue_url: str
    dlq_url: str
    bucket: str
    webhook_secret_arn: str
    api_key_secret_arn: str

    def environment(self) -> dict[str, str]:
        """The Lambda environment variables the template wires to these resources."""
        return {
            "LEDGER_TABLE_NAME": self.table,
            "QUEUE_URL": self.queue_url,
            "RESULTS_BUCKET": self.bucket,
            "WEBHOOK_SECRET_ID": self.webhook_secret_arn,
            "GEONODE_API_KEY_SECRET_ID": self.api_key_secret_arn,
            "MAX_RECEIVE_COUNT": str(
                resolve(properties("JobQueue")["RedrivePolicy"]["maxReceiveCount"])
            ),
        }


def create_all(
    session: Any, *, prefix: str = "scrape-pipeline", api_key: str = ""
) -> StackResources:
    """Every stateful resource of the template, in the account ``session`` points at."""
    table = create_ledger_table(session.client("dynamodb"), f"{prefix}-ledger")
    queue_url, dlq_url = create_queues(session.client("sqs"), f"{prefix}-jobs")
    bucket = create_results_bucket(session.client("s3"), f"{prefix}-results")
    sm = session.client("secretsmanager")
    return StackResources(
        table=table,
        queue_url=queue_url,
        dlq_url=dlq_url,
        bucket=bucket,
        webhook_secret_arn=create_secret(sm, f"{prefix}-webhook-secrets"),
        api_key_secret_arn=create_secret(sm, f"{prefix}-geonode-api-key", api_key or None),
    )
