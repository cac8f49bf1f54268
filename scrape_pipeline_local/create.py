"""The stack's stateful resources, created in moto from the translated template.

``create_all`` walks the translated ``Resources`` and creates every resource of the types moto
can hold for us (DynamoDB tables, SQS queues, S3 buckets, Secrets Manager secrets) in
dependency order; everything else (functions, roles, the API, alarms, the dashboard, event
source mappings, rules) is recorded as skipped: the local stack stands those in itself. moto's
CloudFormation does not deploy a SAM-translated template (field-notes.md), so the walk is ours.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrape_pipeline_local.resolve import (
    Physical,
    Resolver,
    Skipped,
    Unresolvable,
    dead_letter_queue,
    job_queue,
    references,
    scalar_text,
)
from scrape_pipeline_local.translate import (
    API_KEY_SECRET_ID,
    BUCKET,
    EVENT_BUS,
    QUEUE,
    REGION,
    SECRET,
    TABLE,
    TEMPLATE,
    WEBHOOK_SECRET_ID,
    TemplateError,
    only_resource,
    translate,
)

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient
    from types_boto3_s3.client import S3Client
    from types_boto3_secretsmanager.client import SecretsManagerClient
    from types_boto3_sqs.client import SQSClient


def physical_name(prefix: str, logical_id: str, type_: str, *, fifo: bool = False) -> str:
    """``<prefix>-<LogicalId>``, lowercased and cut to what the service accepts."""
    name = f"{prefix}-{logical_id}".lower()
    if type_ == TABLE:
        return re.sub(r"[^a-z0-9_.-]", "-", name)[:255]
    if type_ == QUEUE:
        name = re.sub(r"[^a-z0-9_-]", "-", name)
        return f"{name[:75]}.fifo" if fifo else name[:80]
    if type_ == BUCKET:
        name = re.sub(r"[^a-z0-9.-]", "-", name).strip(".-")[:63].rstrip(".-")
        return name.ljust(3, "0")
    if type_ == SECRET:
        return re.sub(r"[^a-z0-9/_+=.@-]", "-", name)[:512]
    raise ValueError(f"no naming rule for {type_}")


def _not_applied(props: Mapping[str, Any], applied: set[str]) -> tuple[str, ...]:
    return tuple(sorted(set(props) - applied))


_TABLE_APPLIED = {
    "TableName",
    "AttributeDefinitions",
    "KeySchema",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "BillingMode",
    "ProvisionedThroughput",
    "StreamSpecification",
    "TimeToLiveSpecification",
}


def create_table(
    client: DynamoDBClient, logical_id: str, props: Mapping[str, Any], name: str, r: Resolver
) -> Physical:
    """An ``AWS::DynamoDB::Table``: keys, indexes, billing, streams, then TTL."""
    billing = r.resolve(props.get("BillingMode", "PROVISIONED"))
    args: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": r.resolve(props["AttributeDefinitions"]),
        "KeySchema": r.resolve(props["KeySchema"]),
        "BillingMode": billing,
    }
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if key in props:
            args[key] = r.resolve(props[key])
    if billing == "PROVISIONED":
        args["ProvisionedThroughput"] = r.resolve(props["ProvisionedThroughput"])
    stream = r.resolve(props.get("StreamSpecification"))
    if stream:
        args["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    description = client.create_table(**args)["TableDescription"]
    ttl = r.resolve(props.get("TimeToLiveSpecification"))
    if ttl and _flag(ttl.get("Enabled", False)):
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    attributes = {"Arn": description["TableArn"]}
    if "LatestStreamArn" in description:
        attributes["StreamArn"] = description["LatestStreamArn"]
    return Physical(logical_id, TABLE, name, attributes, _not_applied(props, _TABLE_APPLIED))


# CloudFormation property -> SQS attribute, for the attributes that are plain values.
_QUEUE_ATTRIBUTES = {
    "ContentBasedDeduplication": "ContentBasedDeduplication",
    "DeduplicationScope": "DeduplicationScope",
    "DelaySeconds": "DelaySeconds",
    "FifoQueue": "FifoQueue",
    "FifoThroughputLimit": "FifoThroughputLimit",
    "MaximumMessageSize": "MaximumMessageSize",
    "MessageRetentionPeriod": "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds": "ReceiveMessageWaitTimeSeconds",
    "SqsManagedSseEnabled": "SqsManagedSseEnabled",
    "VisibilityTimeout": "VisibilityTimeout",
}


def create_queue(
    client: SQSClient, logical_id: str, props: Mapping[str, Any], name: str, r: Resolver
) -> Physical:
    """An ``AWS::SQS::Queue``: its attributes, and its redrive to a DLQ created before it."""
    attributes: dict[Any, str] = {
        attribute: scalar_text(r.resolve(props[key]))
        for key, attribute in _QUEUE_ATTRIBUTES.items()
        if key in props
    }
    for key in ("RedrivePolicy", "RedriveAllowPolicy"):
        if key in props:
            policy = r.resolve(props[key])
            policy = json.loads(policy) if isinstance(policy, str) else policy
            if "maxReceiveCount" in policy:
                policy["maxReceiveCount"] = scalar_text(policy["maxReceiveCount"])
            attributes[key] = json.dumps(policy)
    url = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    applied = {*_QUEUE_ATTRIBUTES, "QueueName", "RedrivePolicy", "RedriveAllowPolicy"}
    return Physical(
        logical_id,
        QUEUE,
        url,
        {"Arn": arn, "QueueName": name, "QueueUrl": url},
        _not_applied(props, applied),
    )


def create_bucket(
    client: S3Client, logical_id: str, props: Mapping[str, Any], name: str, r: Resolver
) -> Physical:
    """An ``AWS::S3::Bucket``, versioned when the template says so."""
    region = client.meta.region_name
    if region in (None, "us-east-1"):
        client.create_bucket(Bucket=name)
    else:
        client.create_bucket(
            Bucket=name,
            CreateBucketConfiguration={"LocationConstraint": region},  # type: ignore[typeddict-item]
        )
    versioning = r.resolve(props.get("VersioningConfiguration")) or {}
    if versioning.get("Status") in ("Enabled", "Suspended"):
        client.put_bucket_versioning(
            Bucket=name, VersioningConfiguration={"Status": versioning["Status"]}
        )
    notifications = _queue_notifications(r.resolve(props.get("NotificationConfiguration")))
    if notifications:
        # moto delivers them itself (to its SQS backend, as S3 does), its test event first.
        client.put_bucket_notification_configuration(
            Bucket=name,
            NotificationConfiguration={"QueueConfigurations": notifications},  # type: ignore[typeddict-item]
        )
    attributes = {
        "Arn": f"arn:aws:s3:::{name}",
        "DomainName": f"{name}.s3.amazonaws.com",
        "RegionalDomainName": f"{name}.s3.{region or REGION}.amazonaws.com",
    }
    applied = {"BucketName", "VersioningConfiguration"}
    if notifications:
        applied.add("NotificationConfiguration")
    return Physical(logical_id, BUCKET, name, attributes, _not_applied(props, applied))


def create_event_bus(client: Any, logical_id: str, props: Mapping[str, Any], name: str) -> Physical:
    """An ``AWS::Events::EventBus``: moto delivers what is put on it to its rules' targets."""
    arn = client.create_event_bus(Name=name)["EventBusArn"]
    return Physical(
        logical_id, EVENT_BUS, name, {"Arn": arn, "Name": name}, _not_applied(props, {"Name"})
    )


def _queue_notifications(config: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """CloudFormation's ``QueueConfigurations`` in the S3 API's shape (the only kind used)."""
    if not config:
        return []
    others = set(config) - {"QueueConfigurations"}
    if others:
        raise TemplateError(f"bucket notifications of kinds {sorted(others)} are not created")
    found = []
    for queue in config["QueueConfigurations"]:
        notification: dict[str, Any] = {"QueueArn": queue["Queue"], "Events": [queue["Event"]]}
        rules = queue.get("Filter", {}).get("S3Key", {}).get("Rules", [])
        if rules:
            notification["Filter"] = {"Key": {"FilterRules": rules}}
        found.append(notification)
    return found


# GenerateSecretString fields that Secrets Manager's GetRandomPassword takes as they are.
_PASSWORD_OPTIONS = (
    "PasswordLength",
    "ExcludeCharacters",
    "ExcludeNumbers",
    "ExcludePunctuation",
    "ExcludeUppercase",
    "ExcludeLowercase",
    "IncludeSpace",
    "RequireEachIncludedType",
)


def generated_secret(client: SecretsManagerClient, spec: Mapping[str, Any]) -> str:
    """A value for ``GenerateSecretString``, generated as Secrets Manager does (by its API)."""
    options = {key: spec[key] for key in _PASSWORD_OPTIONS if key in spec}
    if "PasswordLength" in options:
        options["PasswordLength"] = int(options["PasswordLength"])
    for key in options.keys() - {"PasswordLength", "ExcludeCharacters"}:
        options[key] = _flag(options[key])
    password = client.get_random_password(**options)["RandomPassword"]
    if "SecretStringTemplate" in spec and "GenerateStringKey" in spec:
        document = json.loads(spec["SecretStringTemplate"])
        document[spec["GenerateStringKey"]] = password
        return json.dumps(document)
    return password


def create_secret_resource(
    client: SecretsManagerClient,
    logical_id: str,
    props: Mapping[str, Any],
    name: str,
    r: Resolver,
    *,
    value: str | None = None,
) -> Physical:
    """An ``AWS::SecretsManager::Secret`` with ``value``, its SecretString, or a generated one."""
    if value is None and "SecretString" in props:
        value = scalar_text(r.resolve(props["SecretString"]))
    if value is None and "GenerateSecretString" in props:
        value = generated_secret(client, r.resolve(props["GenerateSecretString"]))
    args: dict[str, Any] = {"Name": name}
    if value is not None:
        args["SecretString"] = value
    if "Description" in props:
        args["Description"] = scalar_text(r.resolve(props["Description"]))
    arn = client.create_secret(**args)["ARN"]
    applied = {"Name", "Description", "SecretString", "GenerateSecretString"}
    return Physical(logical_id, SECRET, arn, {"Id": arn}, _not_applied(props, applied))


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).lower() == "true"


_NAME_PROPERTY = {
    TABLE: "TableName",
    QUEUE: "QueueName",
    BUCKET: "BucketName",
    SECRET: "Name",
    EVENT_BUS: "Name",
}
_CLIENT = {
    TABLE: "dynamodb",
    QUEUE: "sqs",
    BUCKET: "s3",
    SECRET: "secretsmanager",
    EVENT_BUS: "events",
}
CREATABLE = frozenset(_CLIENT)


@dataclass(frozen=True)
class Created:
    """What ``create_resources`` made (by logical id, in creation order) and what it skipped."""

    physical: Mapping[str, Physical]
    skipped: tuple[Skipped, ...]

    def of_type(self, type_: str) -> dict[str, Physical]:
        """Logical id -> created resource, for one type."""
        return {key: value for key, value in self.physical.items() if value.type == type_}


def creation_order(resources: Mapping[str, Any], creatable: list[str]) -> list[str]:
    """``creatable`` ordered so that each comes after the creatable resources it refers to."""
    wanted = set(creatable)
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(logical_id: str, path: tuple[str, ...]) -> None:
        if state.get(logical_id) == "done":
            return
        if state.get(logical_id) == "visiting":
            raise TemplateError(f"reference cycle: {' -> '.join((*path, logical_id))}")
        state[logical_id] = "visiting"
        resource = resources[logical_id]
        depends = resource.get("DependsOn", [])
        needs = references(resource.get("Properties", {})) | set(
            [depends] if isinstance(depends, str) else depends
        )
        for other in sorted(needs & wanted, key=creatable.index):
            visit(other, (*path, logical_id))
        state[logical_id] = "done"
        order.append(logical_id)

    for logical_id in creatable:
        visit(logical_id, ())
    return order


def create_resources(
    session: Any,
    translation: Mapping[str, Any],
    *,
    prefix: str = "scrape-pipeline",
    secret_values: Mapping[str, str] | None = None,
) -> Created:
    """Create every resource of a type moto holds for us, from a translated template."""
    resources: Mapping[str, Any] = translation["Resources"]
    region = session.region_name or REGION
    resolver = Resolver(translation, region=region, stack_name=prefix)
    skipped: list[Skipped] = []
    creatable: list[str] = []
    for logical_id, resource in resources.items():
        type_ = resource["Type"]
        if type_ not in CREATABLE:
            skipped.append(Skipped(logical_id, type_))
        elif "Condition" in resource and not resolver.condition(resource["Condition"]):
            skipped.append(Skipped(logical_id, type_, f"condition {resource['Condition']} false"))
        else:
            creatable.append(logical_id)
    clients: dict[str, Any] = {}
    for logical_id in creation_order(resources, creatable):
        type_ = resources[logical_id]["Type"]
        props = resources[logical_id].get("Properties", {})
        service = _CLIENT[type_]
        client = clients.get(service) or clients.setdefault(service, session.client(service))
        try:
            resolver.physical[logical_id] = _create_one(
                client,
                logical_id,
                type_,
                props,
                prefix=prefix,
                resolver=resolver,
                secret_values=secret_values or {},
            )
        except Unresolvable as error:
            raise TemplateError(f"{logical_id} cannot be created locally: {error}") from error
    return Created(physical=dict(resolver.physical), skipped=tuple(skipped))


def _create_one(
    client: Any,
    logical_id: str,
    type_: str,
    props: Mapping[str, Any],
    *,
    prefix: str,
    resolver: Resolver,
    secret_values: Mapping[str, str],
) -> Physical:
    name_property = _NAME_PROPERTY[type_]
    if name_property in props:
        name = scalar_text(resolver.resolve(props[name_property]))
    else:
        fifo = type_ == QUEUE and _flag(resolver.resolve(props.get("FifoQueue", False)))
        name = physical_name(prefix, logical_id, type_, fifo=fifo)
    if type_ == TABLE:
        return create_table(client, logical_id, props, name, resolver)
    if type_ == QUEUE:
        return create_queue(client, logical_id, props, name, resolver)
    if type_ == BUCKET:
        return create_bucket(client, logical_id, props, name, resolver)
    if type_ == EVENT_BUS:
        return create_event_bus(client, logical_id, props, name)
    value = secret_values.get(logical_id)
    return create_secret_resource(client, logical_id, props, name, resolver, value=value)


@dataclass(frozen=True)
class StackResources:
    """Names and addresses of what ``create_all`` made."""

    table: str
    queue_url: str
    dlq_url: str
    bucket: str
    webhook_secret_arn: str
    api_key_secret_arn: str
    # The stack's EventBridge bus ("": a template without one, so no events).
    event_bus: str = ""
    # The job queue's maxReceiveCount as the template resolves it (None: read the template).
    max_receive_count: str | None = None
    # Every resource created (logical id -> Physical) and every one skipped, for inspection.
    created: Mapping[str, Physical] = field(default_factory=dict, compare=False)
    skipped: tuple[Skipped, ...] = ()

    def environment(self) -> dict[str, str]:
        """The Lambda environment variables the template wires to these resources."""
        max_receive_count = self.max_receive_count
        if max_receive_count is None:
            translation = translate()
            max_receive_count = _max_receive_count(translation, job_queue(translation)[1])
        return {
            "LEDGER_TABLE_NAME": self.table,
            "QUEUE_URL": self.queue_url,
            "RESULTS_BUCKET": self.bucket,
            "WEBHOOK_SECRET_ID": self.webhook_secret_arn,
            "GEONODE_API_KEY_SECRET_ID": self.api_key_secret_arn,
            "MAX_RECEIVE_COUNT": max_receive_count,
            "EVENT_BUS_NAME": self.event_bus,
        }


def _max_receive_count(translation: Mapping[str, Any], queue: Mapping[str, Any]) -> str:
    value = queue["Properties"]["RedrivePolicy"]["maxReceiveCount"]
    return scalar_text(Resolver(translation).resolve(value))


def create_all(
    session: Any,
    *,
    prefix: str = "scrape-pipeline",
    api_key: str = "",
    template_path: Path | str = TEMPLATE,
) -> StackResources:
    """Every resource of the translated template that moto holds, in ``session``'s account."""
    translation = translate(template_path)
    created = create_resources(
        session,
        translation,
        prefix=prefix,
        secret_values={API_KEY_SECRET_ID: api_key} if api_key else None,
    )
    queue_id, queue = job_queue(translation)
    table_id, _ = only_resource(translation, TABLE)
    bucket_id, _ = only_resource(translation, BUCKET)
    secret_ids = set(created.of_type(SECRET))
    for logical_id in (WEBHOOK_SECRET_ID, API_KEY_SECRET_ID):
        if logical_id not in secret_ids:
            raise TemplateError(f"the template creates no {SECRET} named {logical_id}")
    physical = created.physical
    buses = created.of_type(EVENT_BUS)
    return StackResources(
        event_bus=next(iter(buses.values())).ref if buses else "",
        table=physical[table_id].ref,
        queue_url=physical[queue_id].ref,
        dlq_url=physical[dead_letter_queue(translation)].ref,
        bucket=physical[bucket_id].ref,
        webhook_secret_arn=physical[WEBHOOK_SECRET_ID].ref,
        api_key_secret_arn=physical[API_KEY_SECRET_ID].ref,
        max_receive_count=_max_receive_count(translation, queue),
        created=physical,
        skipped=created.skipped,
    )


def create_ledger_table(client: DynamoDBClient, table_name: str) -> str:
    """The ledger with the template's key schema, indexes, billing and TTL."""
    logical_id, resource = only_resource(translate(), TABLE)
    props = resource.get("Properties", {})
    return create_table(client, logical_id, props, table_name, Resolver(translate())).ref


def create_queues(client: SQSClient, name: str) -> tuple[str, str]:
    """The job queue (``name``) and its DLQ (``name-dlq``) with the template's attributes."""
    translation = translate()
    queue_id, queue = job_queue(translation)
    dlq_id = dead_letter_queue(translation)
    resolver = Resolver(translation)
    dlq_props = translation["Resources"][dlq_id].get("Properties", {})
    resolver.physical[dlq_id] = create_queue(client, dlq_id, dlq_props, f"{name}-dlq", resolver)
    created = create_queue(client, queue_id, queue.get("Properties", {}), name, resolver)
    return created.ref, resolver.physical[dlq_id].ref


def create_results_bucket(client: S3Client, bucket: str) -> str:
    """The results bucket, versioned as the template says (versions count double writes)."""
    logical_id, resource = only_resource(translate(), BUCKET)
    props = resource.get("Properties", {})
    return create_bucket(client, logical_id, props, bucket, Resolver(translate())).ref


def create_secret(client: SecretsManagerClient, name: str, value: str | None = None) -> str:
    """A secret; without a value, one generated like the webhook secret's GenerateSecretString."""
    props = translate()["Resources"][WEBHOOK_SECRET_ID].get("Properties", {})
    if value is None and "GenerateSecretString" not in props:
        value = secrets.token_urlsafe(36)
    resolver = Resolver(translate())
    return create_secret_resource(client, WEBHOOK_SECRET_ID, props, name, resolver, value=value).ref
