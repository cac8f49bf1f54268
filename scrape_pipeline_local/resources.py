"""The stack's stateful resources, created in moto from template.yaml as SAM translates it.

``translate`` runs aws-sam-translator in-process and offline, as ``sam validate`` does (fake
S3 code URIs, a managed-policy loader that must never be needed, region us-east-1, the
parameters' defaults). ``create_all`` walks the translated ``Resources`` and creates every
resource of the types moto can hold for us (DynamoDB tables, SQS queues, S3 buckets, Secrets
Manager secrets) in dependency order, with a small intrinsic resolver; everything else
(functions, roles, the API, alarms, the dashboard, event source mappings, rules) is recorded
as skipped: the local stack stands those in itself. moto's CloudFormation does not deploy a
SAM-translated template (field-notes.md), so the walk is ours.

``local_settings`` reads what the local stack needs from the functions' wiring: the SQS event
source's batch size, the reconciler's schedule in seconds and the functions' environment.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from types_boto3_dynamodb.client import DynamoDBClient
    from types_boto3_s3.client import S3Client
    from types_boto3_secretsmanager.client import SecretsManagerClient
    from types_boto3_sqs.client import SQSClient

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"
# moto's default account: the ARNs it makes carry it.
ACCOUNT_ID = "123456789012"

TABLE = "AWS::DynamoDB::Table"
QUEUE = "AWS::SQS::Queue"
BUCKET = "AWS::S3::Bucket"
SECRET = "AWS::SecretsManager::Secret"  # noqa: S105 - a resource type
FUNCTION = "AWS::Lambda::Function"
WEBHOOK_SECRET_ID = "WebhookSecret"  # noqa: S105 - a logical id
API_KEY_SECRET_ID = "GeonodeApiKeySecret"  # noqa: S105 - a logical id

# Local code paths `sam validate` swaps for a fake S3 URI before translating (samcli's
# SamTemplateValidator does the same): the translator accepts only s3:// locations.
_LOCAL_URI_PROPERTIES = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
    "AWS::Serverless::Api": "DefinitionUri",
    "AWS::Serverless::HttpApi": "DefinitionUri",
    "AWS::Serverless::StateMachine": "DefinitionUri",
}
FAKE_S3_URI = "s3://bucket/value"


class TemplateError(Exception):
    """The template cannot be translated or created locally as it stands."""


class Unresolvable(Exception):
    """An intrinsic the local resolver cannot evaluate (e.g. a reference to a skipped resource)."""


# -- the template and its translation -------------------------------------------------------


@cache
def template(path: Path = TEMPLATE) -> dict[str, Any]:
    """template.yaml as plain data, short-form tags (!Ref, !Sub, ...) in their long form."""
    from cfnlint.decode import cfn_yaml

    plain: dict[str, Any] = json.loads(json.dumps(cfn_yaml.load(str(path))))
    return plain


def properties(name: str) -> dict[str, Any]:
    """One resource's Properties, as written in template.yaml."""
    return dict(template()["Resources"][name].get("Properties", {}))


def parameter_default(name: str) -> Any:
    """A template parameter's default value."""
    return template()["Parameters"][name].get("Default")


def parameter_defaults(tmpl: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter that has a default, with it (the values a stack gets when given none)."""
    return {
        name: spec["Default"]
        for name, spec in tmpl.get("Parameters", {}).items()
        if "Default" in spec
    }


def with_fake_code_uris(tmpl: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a SAM template whose local code paths point at S3, as `sam validate` does."""
    out: dict[str, Any] = copy.deepcopy(dict(tmpl))
    function_globals = out.get("Globals", {}).get("Function", {})
    if isinstance(function_globals.get("CodeUri"), str):
        function_globals["CodeUri"] = FAKE_S3_URI
    for resource in out.get("Resources", {}).values():
        key = _LOCAL_URI_PROPERTIES.get(resource.get("Type", ""))
        props = resource.get("Properties", {})
        value = props.get(key) if key else None
        if key and isinstance(value, str) and not value.startswith("s3://"):
            props[key] = FAKE_S3_URI
    return out


class OfflineManagedPolicyLoader:
    """Stands in for IAM: the translator asks it only for a managed-policy name missing from
    its bundled map, which online would be an IAM call (and fails offline). It returns {} and
    counts the calls; ``translate`` fails when there were any."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, str]:
        self.calls += 1
        return {}


def translate(template_path: Path | str = TEMPLATE) -> dict[str, Any]:
    """The template translated to CloudFormation by aws-sam-translator, offline (a copy)."""
    path = Path(template_path).resolve()
    stat = path.stat()
    return copy.deepcopy(_translate(str(path), stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=8)
def _translate(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    """Translation of one version of a file (the key changes when the file does)."""
    import boto3
    from cfnlint.decode import cfn_yaml
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    sam: dict[str, Any] = with_fake_code_uris(json.loads(json.dumps(cfn_yaml.load(path))))
    loader = OfflineManagedPolicyLoader()
    # A session of its own: no credentials are needed, and the region is not the caller's.
    translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name=REGION))
    try:
        with _quiet_feature_toggle():
            translated: dict[str, Any] = translator.translate(
                sam, parameter_values=parameter_defaults(sam), get_managed_policy_map=loader
            )
    except InvalidDocumentException as error:
        causes = "; ".join(getattr(cause, "message", str(cause)) for cause in error.causes)
        raise TemplateError(f"aws-sam-translator rejected {path}: {causes}") from error
    if loader.calls:
        raise TemplateError(
            f"{path} names a managed policy aws-sam-translator does not know: translating it "
            "would call IAM (use the policy's ARN or a SAM policy template)"
        )
    plain: dict[str, Any] = json.loads(json.dumps(translated))
    return plain


@contextmanager
def _quiet_feature_toggle() -> Iterator[None]:
    """The translator warns about feature flags missing from its local config on every run."""
    logger = logging.getLogger("samtranslator.feature_toggle.feature_toggle")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


# -- intrinsic functions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Physical:
    """A created resource: what ``Ref`` and ``Fn::GetAtt`` give for it."""

    logical_id: str
    type: str
    ref: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    # Properties the template sets that the local resource does not apply (moto lacks them or
    # they change nothing locally: encryption, public access blocks, backups).
    not_applied: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A translated resource the local stack does not create in moto."""

    logical_id: str
    type: str
    reason: str = "stood in by the local stack"


_NO_VALUE = object()
_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


class Resolver:
    """Ref, Fn::GetAtt, Fn::Sub, Fn::Join, Fn::Select, Fn::If and conditions, locally.

    Parameters resolve to their defaults, resources to what was created for them so far;
    anything else raises ``Unresolvable``.
    """

    def __init__(
        self,
        tmpl: Mapping[str, Any],
        physical: Mapping[str, Physical] | None = None,
        *,
        region: str = REGION,
        stack_name: str = "scrape-pipeline",
    ) -> None:
        self.template = tmpl
        self.parameters = parameter_defaults(tmpl)
        self.physical: dict[str, Physical] = dict(physical or {})
        self.pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": stack_name,
            "AWS::StackId": (
                f"arn:aws:cloudformation:{region}:{ACCOUNT_ID}:stack/{stack_name}/local"
            ),
        }

    def resolve(self, value: Any) -> Any:
        """A value with every intrinsic evaluated (``AWS::NoValue`` entries dropped)."""
        out = self._resolve(value)
        return None if out is _NO_VALUE else out

    def condition(self, name: str) -> bool:
        """A named condition of the template."""
        conditions = self.template.get("Conditions", {})
        if name not in conditions:
            raise Unresolvable(f"no condition {name}")
        return self._truth(conditions[name])

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [item for item in map(self._resolve, value) if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
                return self._get_att(logical_id, self._resolve(attribute))
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Join":
                delimiter, items = arg
                return str(delimiter).join(_text(item) for item in self._resolve(items))
            if key == "Fn::Select":
                index, items = arg
                return self._resolve(items)[int(self._resolve(index))]
            if key == "Fn::If":
                name, if_true, if_false = arg
                return self._resolve(if_true if self.condition(name) else if_false)
            if key.startswith("Fn::") or key == "Condition":
                raise Unresolvable(f"{key} is not evaluated locally")
        resolved = {name: self._resolve(item) for name, item in value.items()}
        return {name: item for name, item in resolved.items() if item is not _NO_VALUE}

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.physical:
            return self.physical[name].ref
        raise Unresolvable(f"Ref {name}: not a parameter or a resource created locally")

    def _get_att(self, logical_id: str, attribute: str) -> str:
        created = self.physical.get(logical_id)
        if created is None:
            raise Unresolvable(f"Fn::GetAtt {logical_id}.{attribute}: not created locally")
        if attribute not in created.attributes:
            raise Unresolvable(f"Fn::GetAtt {logical_id}.{attribute}: unknown attribute")
        return created.attributes[attribute]

    def _sub(self, arg: Any) -> str:
        text: str = arg if isinstance(arg, str) else arg[0]
        variables: dict[str, Any] = {} if isinstance(arg, str) else arg[1]
        local = {name: self._resolve(item) for name, item in variables.items()}

        def one(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name in local:
                return _text(local[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self._get_att(logical_id, attribute)
            return _text(self._ref(name))

        return _SUB_VARIABLE.sub(one, text).replace("${!", "${")

    def _truth(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Not":
                return not self._truth(arg[0])
            if key == "Fn::And":
                return all(self._truth(item) for item in arg)
            if key == "Fn::Or":
                return any(self._truth(item) for item in arg)
            if key == "Fn::Equals":
                left, right = (_text(self._resolve(item)) for item in arg)
                return left == right
        raise Unresolvable(f"condition {value!r} is not evaluated locally")


def _text(value: Any) -> str:
    """A resolved scalar as CloudFormation renders it in strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise Unresolvable(f"{value!r} is not a scalar")
    return str(value)


def references(value: Any) -> set[str]:
    """Names a value refers to through Ref, Fn::GetAtt or Fn::Sub (parameters included)."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                found.add(arg.split(".", 1)[0] if isinstance(arg, str) else arg[0])
            elif key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                local = set() if isinstance(arg, str) else set(arg[1])
                for name in _SUB_VARIABLE.findall(text):
                    base = name.strip() if name.startswith("AWS::") else name.split(".")[0]
                    if base not in local:
                        found.add(base)
                if not isinstance(arg, str):
                    found |= references(arg[1])
            else:
                found |= references(arg)
    return found


# -- creating resources ------------------------------------------------------------------------


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
        attribute: _text(r.resolve(props[key]))
        for key, attribute in _QUEUE_ATTRIBUTES.items()
        if key in props
    }
    for key in ("RedrivePolicy", "RedriveAllowPolicy"):
        if key in props:
            policy = r.resolve(props[key])
            policy = json.loads(policy) if isinstance(policy, str) else policy
            if "maxReceiveCount" in policy:
                policy["maxReceiveCount"] = _text(policy["maxReceiveCount"])
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
    attributes = {
        "Arn": f"arn:aws:s3:::{name}",
        "DomainName": f"{name}.s3.amazonaws.com",
        "RegionalDomainName": f"{name}.s3.{region or REGION}.amazonaws.com",
    }
    applied = {"BucketName", "VersioningConfiguration"}
    return Physical(logical_id, BUCKET, name, attributes, _not_applied(props, applied))


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
        value = _text(r.resolve(props["SecretString"]))
    if value is None and "GenerateSecretString" in props:
        value = generated_secret(client, r.resolve(props["GenerateSecretString"]))
    args: dict[str, Any] = {"Name": name}
    if value is not None:
        args["SecretString"] = value
    if "Description" in props:
        args["Description"] = _text(r.resolve(props["Description"]))
    arn = client.create_secret(**args)["ARN"]
    applied = {"Name", "Description", "SecretString", "GenerateSecretString"}
    return Physical(logical_id, SECRET, arn, {"Id": arn}, _not_applied(props, applied))


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).lower() == "true"


_NAME_PROPERTY = {TABLE: "TableName", QUEUE: "QueueName", BUCKET: "BucketName", SECRET: "Name"}
_CLIENT = {TABLE: "dynamodb", QUEUE: "sqs", BUCKET: "s3", SECRET: "secretsmanager"}
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
        name = _text(resolver.resolve(props[name_property]))
    else:
        fifo = type_ == QUEUE and _flag(resolver.resolve(props.get("FifoQueue", False)))
        name = physical_name(prefix, logical_id, type_, fifo=fifo)
    if type_ == TABLE:
        return create_table(client, logical_id, props, name, resolver)
    if type_ == QUEUE:
        return create_queue(client, logical_id, props, name, resolver)
    if type_ == BUCKET:
        return create_bucket(client, logical_id, props, name, resolver)
    value = secret_values.get(logical_id)
    return create_secret_resource(client, logical_id, props, name, resolver, value=value)


# -- what the local stack uses -------------------------------------------------------------------


@dataclass(frozen=True)
class StackResources:
    """Names and addresses of what ``create_all`` made."""

    table: str
    queue_url: str
    dlq_url: str
    bucket: str
    webhook_secret_arn: str
    api_key_secret_arn: str
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
        }


def _max_receive_count(translation: Mapping[str, Any], queue: Mapping[str, Any]) -> str:
    value = queue["Properties"]["RedrivePolicy"]["maxReceiveCount"]
    return _text(Resolver(translation).resolve(value))


def resources_of_type(translation: Mapping[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for every translated resource of one type."""
    return {
        logical_id: resource
        for logical_id, resource in translation["Resources"].items()
        if resource["Type"] == type_
    }


def _only(translation: Mapping[str, Any], type_: str) -> tuple[str, dict[str, Any]]:
    found = resources_of_type(translation, type_)
    if len(found) != 1:
        raise TemplateError(f"expected one {type_}, found {sorted(found) or 'none'}")
    return next(iter(found.items()))


def job_queue(translation: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The queue with a RedrivePolicy: the job queue (exactly one)."""
    found = {
        logical_id: resource
        for logical_id, resource in resources_of_type(translation, QUEUE).items()
        if "RedrivePolicy" in resource.get("Properties", {})
    }
    if len(found) != 1:
        raise TemplateError(f"expected one queue with a RedrivePolicy, found {sorted(found)}")
    return next(iter(found.items()))


def dead_letter_queue(translation: Mapping[str, Any]) -> str:
    """The logical id of the job queue's redrive target."""
    _, queue = job_queue(translation)
    target = queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]
    names = references(target) & set(resources_of_type(translation, QUEUE))
    if len(names) != 1:
        raise TemplateError(f"the job queue's deadLetterTargetArn names no queue: {target!r}")
    return names.pop()


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
    table_id, _ = _only(translation, TABLE)
    bucket_id, _ = _only(translation, BUCKET)
    secret_ids = set(created.of_type(SECRET))
    for logical_id in (WEBHOOK_SECRET_ID, API_KEY_SECRET_ID):
        if logical_id not in secret_ids:
            raise TemplateError(f"the template creates no {SECRET} named {logical_id}")
    physical = created.physical
    return StackResources(
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


class LocalSettings(TypedDict):
    """What the local stack takes from the functions' wiring in the translated template."""

    batch_size: int  # the SQS event source mapping's BatchSize
    batching_window_seconds: int  # its MaximumBatchingWindowInSeconds (0 when unset)
    reconcile_schedule: str  # the EventBridge rule's ScheduleExpression
    reconcile_interval: float  # that expression in seconds
    function_timeouts: dict[str, int]  # logical id -> the function's resolved Timeout
    processor_timeout: int  # the Timeout of the event source mapping's function
    reconciler_timeout: int  # the Timeout of the scheduled rule's target
    receiver_timeout: int  # the Timeout of the function the REST API integrates
    env: dict[str, str]  # the functions' variables that agree across functions
    function_env: dict[str, dict[str, str]]  # logical id -> that function's resolved variables
    unresolved: NotRequired[dict[str, str]]  # variable -> why it was left out


# Lambda's defaults when the template leaves them out.
_DEFAULT_SQS_BATCH_SIZE = 10
_DEFAULT_FUNCTION_TIMEOUT = 3

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def schedule_seconds(expression: str) -> float:
    """A ``rate(...)`` expression in seconds (a cron expression has no fixed interval)."""
    match = _RATE.match(expression.strip())
    if match is None:
        raise ValueError(f"{expression!r} is not a rate(...) expression")
    count, unit = int(match.group(1)), match.group(2)
    return float(count * _UNIT_SECONDS[unit.rstrip("s")])


def local_settings(
    translation: Mapping[str, Any], resources: StackResources | None = None
) -> LocalSettings:
    """The processor's SQS batching, the reconciler's schedule, the functions' timeouts and
    environment.

    Environment variables resolve parameters to their defaults and resources to what
    ``resources`` created (without it, a variable naming any resource is left out); a variable
    naming a resource moto does not hold (a function, the API) is left out and listed in
    ``unresolved``. A variable whose value differs between functions (POWERTOOLS_SERVICE_NAME)
    is only in ``function_env``.
    """
    queue_id, _ = job_queue(translation)
    mappings = [
        resource["Properties"]
        for resource in resources_of_type(translation, "AWS::Lambda::EventSourceMapping").values()
        if queue_id in references(resource["Properties"].get("EventSourceArn"))
    ]
    if len(mappings) != 1:
        raise TemplateError(f"expected one event source mapping on {queue_id}, found {mappings}")
    rules = [
        resource["Properties"]
        for resource in resources_of_type(translation, "AWS::Events::Rule").values()
        if "ScheduleExpression" in resource["Properties"]
    ]
    if len(rules) != 1:
        raise TemplateError(f"expected one scheduled rule, found {len(rules)}")
    resolver = Resolver(translation, resources.created if resources else None)
    mapping = resolver.resolve(
        {key: mappings[0].get(key) for key in ("BatchSize", "MaximumBatchingWindowInSeconds")}
    )
    schedule = _text(resolver.resolve(rules[0]["ScheduleExpression"]))
    timeouts = function_timeouts(translation)
    api_id, api = _only(translation, "AWS::ApiGateway::RestApi")
    function_env, unresolved = _function_environments(translation, resolver)
    values: dict[str, set[str]] = {}
    for variables in function_env.values():
        for name, value in variables.items():
            values.setdefault(name, set()).add(value)
    settings = LocalSettings(
        batch_size=int(mapping.get("BatchSize") or _DEFAULT_SQS_BATCH_SIZE),
        batching_window_seconds=int(mapping.get("MaximumBatchingWindowInSeconds") or 0),
        reconcile_schedule=schedule,
        reconcile_interval=schedule_seconds(schedule),
        function_timeouts=timeouts,
        processor_timeout=timeouts[_function_named(timeouts, "the SQS mapping", mappings[0])],
        reconciler_timeout=timeouts[_function_named(timeouts, "the rule", rules[0]["Targets"])],
        receiver_timeout=timeouts[_function_named(timeouts, api_id, api.get("Properties", {}))],
        env={name: seen.pop() for name, seen in sorted(values.items()) if len(seen) == 1},
        function_env=function_env,
    )
    if unresolved:
        settings["unresolved"] = unresolved
    return settings


def function_timeouts(translation: Mapping[str, Any]) -> dict[str, int]:
    """Logical id -> each function's Timeout in seconds, parameters at their defaults."""
    resolver = Resolver(translation)
    return {
        logical_id: int(
            resolver.resolve(resource["Properties"].get("Timeout", _DEFAULT_FUNCTION_TIMEOUT))
        )
        for logical_id, resource in resources_of_type(translation, FUNCTION).items()
    }


def _function_named(functions: Mapping[str, Any], where: str, value: Any) -> str:
    """The one function ``value`` refers to."""
    named = references(value) & set(functions)
    if len(named) != 1:
        raise TemplateError(f"expected {where} to name one function, found {sorted(named)}")
    return named.pop()


def _function_environments(
    translation: Mapping[str, Any], resolver: Resolver
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    function_env: dict[str, dict[str, str]] = {}
    unresolved: dict[str, str] = {}
    for logical_id, resource in resources_of_type(translation, FUNCTION).items():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        resolved: dict[str, str] = {}
        for name, value in variables.items():
            try:
                resolved[name] = _text(resolver.resolve(value))
            except Unresolvable as error:
                unresolved[name] = str(error)
        function_env[logical_id] = resolved
    return function_env, unresolved


# -- the helpers the tests and benchmarks use directly -------------------------------------------


def create_ledger_table(client: DynamoDBClient, table_name: str) -> str:
    """The ledger with the template's key schema, indexes, billing and TTL."""
    logical_id, resource = _only(translate(), TABLE)
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
    logical_id, resource = _only(translate(), BUCKET)
    props = resource.get("Properties", {})
    return create_bucket(client, logical_id, props, bucket, Resolver(translate())).ref


def create_secret(client: SecretsManagerClient, name: str, value: str | None = None) -> str:
    """A secret; without a value, one generated like the webhook secret's GenerateSecretString."""
    props = translate()["Resources"][WEBHOOK_SECRET_ID].get("Properties", {})
    if value is None and "GenerateSecretString" not in props:
        value = secrets.token_urlsafe(36)
    resolver = Resolver(translate())
    return create_secret_resource(client, WEBHOOK_SECRET_ID, props, name, resolver, value=value).ref
