"""Least privilege, checked by execution: recorded AWS calls against the template's IAM roles.

moto enforces no IAM, so a missing action or a resource ARN that misses an index, a key prefix
or a queue would pass every other test. Here each recorded call (``aws_calls.Call``) becomes
the IAM action and resource ARN it is authorized against, and is evaluated against the role of
the function that made it, as the translated template gives that role (inline policies, SAM
policy templates expanded, AWS managed policies from ``MANAGED_POLICIES``), its intrinsics
resolved to the local stack's resources.

Evaluation, as IAM does for one identity's policies: a matching Deny wins, else a matching
Allow grants, else the call is denied. parliament's action catalogue expands action
patterns (``sqs:SendMessage*``, ``NotAction``) and tells unknown actions apart; resources are
matched with IAM's wildcards (``*`` any run of characters, ``?`` one). A statement with a
Condition never grants here (nothing the functions do depends on one), but its Deny applies.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import sys
import types
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from scrape_pipeline_local.aws_calls import Call
from scrape_pipeline_local.resolve import Resolver, references
from scrape_pipeline_local.translate import ACCOUNT_ID, REGION

# API operations authorized by an IAM action of another name (the rest: service:Operation).
# https://docs.aws.amazon.com/service-authorization/latest/reference/ lists each service's.
ACTION_OF_OPERATION: dict[tuple[str, str], str] = {
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "ListObjectVersions"): "s3:ListBucketVersions",
    ("s3", "CreateMultipartUpload"): "s3:PutObject",
    ("s3", "UploadPart"): "s3:PutObject",
    ("s3", "CompleteMultipartUpload"): "s3:PutObject",
    ("dynamodb", "TransactGetItems"): "dynamodb:GetItem",
}
# A versioned read or delete needs the *Version action.
_VERSIONED = {"s3:GetObject": "s3:GetObjectVersion", "s3:DeleteObject": "s3:DeleteObjectVersion"}
# TransactWriteItems is authorized item by item.
_TRANSACT_ITEM_ACTION = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}

# The AWS managed policies SAM attaches, as AWS publishes them (a role naming any other one
# fails the check until it is added here).
MANAGED_POLICIES: dict[str, dict[str, Any]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": "*",
            }
        ],
    },
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                ],
                "Resource": "*",
            }
        ],
    },
    # What SAM attaches for `Tracing` (samtranslator xray_utils, the aws partition's name).
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "xray:GetSamplingRules",
                    "xray:GetSamplingTargets",
                    "xray:GetSamplingStatisticSummaries",
                ],
                "Resource": ["*"],
            }
        ],
    },
}


class IamCheckError(Exception):
    """The template or a recorded call cannot be evaluated (not: a call was denied)."""


@dataclass(frozen=True)
class Request:
    """One authorization request: an IAM action on one resource ARN."""

    action: str
    resource: str


@dataclass(frozen=True)
class Decision:
    """The outcome for one request, and the statements that decided it."""

    allowed: bool
    reason: str


@dataclass
class Role:
    """A role's policy documents, intrinsics resolved."""

    name: str
    documents: list[dict[str, Any]] = field(default_factory=list)


# -- calls -> requests ------------------------------------------------------------------------


def requests_of(call: Call, *, region: str = REGION, account: str = ACCOUNT_ID) -> list[Request]:
    """The IAM requests one API call makes (a transaction: one per item)."""
    prefix = call.service
    action = ACTION_OF_OPERATION.get((call.service, call.operation), f"{prefix}:{call.operation}")
    if call.param("VersionId"):
        action = _VERSIONED.get(action, action)
    if call.service == "dynamodb":
        return _dynamodb(call, action, region, account)
    if call.service == "sqs":
        return [Request(action, _queue_arn(call, region, account))]
    if call.service == "s3":
        bucket, key = call.param("Bucket"), call.param("Key")
        if bucket is None:
            return [Request(action, "*")]
        return [Request(action, f"arn:aws:s3:::{bucket}" + (f"/{key}" if key is not None else ""))]
    if call.service == "secretsmanager":
        secret = call.param("SecretId") or "*"
        if secret != "*" and not secret.startswith("arn:"):
            # IAM sees the full ARN (with its random suffix); a name alone matches a policy
            # only through a wildcard.
            secret = f"arn:aws:secretsmanager:{region}:{account}:secret:{secret}"
        return [Request(action, secret)]
    if call.service == "events" and (call.param("Rule") or call.param("Name")):
        return [Request(action, _rule_arn(call, region, account))]
    if call.service == "events":
        buses = [bus for name, bus in call.params if name == "EventBus"] or ["default"]
        return [
            Request(action, bus if bus.startswith("arn:") else _bus_arn(bus, region, account))
            for bus in buses
        ]
    if call.service == "cloudformation":
        stack = call.param("StackName")
        if stack is None:
            return [Request(action, "*")]
        if not stack.startswith("arn:"):
            stack = f"arn:aws:cloudformation:{region}:{account}:stack/{stack}/local"
        return [Request(action, stack)]
    raise IamCheckError(f"no resource mapping for {call.service}:{call.operation}")


def _rule_arn(call: Call, region: str, account: str) -> str:
    """A rule's ARN: ``rule/<name>`` on the default bus, ``rule/<bus>/<name>`` on another."""
    name = call.param("Rule") or call.param("Name")
    bus = (call.param("EventBusName") or "default").rsplit("/", 1)[-1]
    path = name if bus == "default" else f"{bus}/{name}"
    return f"arn:aws:events:{region}:{account}:rule/{path}"


def _bus_arn(bus: str, region: str, account: str) -> str:
    return f"arn:aws:events:{region}:{account}:event-bus/{bus}"


def _table_arn(table: str, region: str, account: str) -> str:
    return f"arn:aws:dynamodb:{region}:{account}:table/{table}"


def _dynamodb(call: Call, action: str, region: str, account: str) -> list[Request]:
    if call.operation == "TransactWriteItems":
        return [
            Request(_TRANSACT_ITEM_ACTION[name.split(":", 1)[1]], _table_arn(t, region, account))
            for name, t in call.params
            if name.startswith("Table:")
        ]
    tables = [t for name, t in call.params if name.startswith("Table:")]
    table = call.param("TableName")
    if table is not None:
        arn = _table_arn(table, region, account)
        index = call.param("IndexName")
        return [Request(action, f"{arn}/index/{index}" if index else arn)]
    if tables:
        return [Request(action, _table_arn(t, region, account)) for t in tables]
    return [Request(action, "*")]  # ListTables and the like


def _queue_arn(call: Call, region: str, account: str) -> str:
    url = call.param("QueueUrl")
    if url is not None:
        # https://sqs.<region>.amazonaws.com/<account>/<name> (moto: http://host:port/...)
        owner, name = urlsplit(url).path.strip("/").split("/")[-2:]
        return f"arn:aws:sqs:{region}:{owner}:{name}"
    queue = call.param("QueueName")
    if queue is not None:
        return f"arn:aws:sqs:{region}:{call.param('QueueOwnerAWSAccountId') or account}:{queue}"
    return "*"


# -- roles from the translated template -----------------------------------------------------


def function_roles(translation: Mapping[str, Any], created: Mapping[str, Any]) -> dict[str, Role]:
    """Function logical id -> its role's documents, resolved against ``created`` resources."""
    resources = translation["Resources"]
    resolver = Resolver(translation, created)
    roles: dict[str, Role] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        (role_id,) = references(resource["Properties"]["Role"])
        props = resources[role_id]["Properties"]
        role = Role(role_id)
        for policy in props.get("Policies", []):
            # Id (an optional IAM element) names the document in decisions.
            role.documents.append(
                {"Id": policy["PolicyName"], **resolver.resolve(policy["PolicyDocument"])}
            )
        for named in props.get("ManagedPolicyArns", []):
            arn = resolver.resolve(named)
            if arn not in MANAGED_POLICIES:
                raise IamCheckError(f"{role_id}: managed policy {arn} unknown to the check")
            role.documents.append({"Id": arn.rsplit("/", 1)[-1], **MANAGED_POLICIES[arn]})
        roles[logical_id] = role
    return roles


# -- evaluation ----------------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _parliament() -> Any:
    """parliament, its one use of setuptools' ``pkg_resources`` answered by importlib.

    parliament 1.6.4, the newest, imports ``pkg_resources`` (gone from setuptools 81 on) only
    to call ``resource_filename`` on two files it ships, once, at import. A module giving
    that one call stands in for the import alone, so the dev environment needs no setuptools
    (a setuptools below 81 has a published advisory, fixed in 83).
    """
    if "parliament" in sys.modules:
        return sys.modules["parliament"]
    shim = types.ModuleType("pkg_resources")

    def resource_filename(package: str, name: str) -> str:
        return str(importlib.resources.files(package).joinpath(name))

    shim.resource_filename = resource_filename  # type: ignore[attr-defined]
    previous = sys.modules.get("pkg_resources")
    sys.modules["pkg_resources"] = shim
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its import leaves both files open
            import parliament
    finally:
        if previous is None:
            del sys.modules["pkg_resources"]
        else:
            sys.modules["pkg_resources"] = previous
    return parliament


@cache
def expand(pattern: str) -> frozenset[str]:
    """An action pattern as the actions it names (parliament's catalogue), lower-cased."""
    expand_action = _parliament().expand_action
    if pattern in ("*", "*:*"):
        return frozenset({"*"})
    return frozenset(f"{a['service']}:{a['action']}".lower() for a in expand_action(pattern, False))


def known_action(action: str) -> bool:
    """True when ``action`` is in parliament's catalogue of IAM actions."""
    return action.lower() in expand(action)


def _names_action(statement: Mapping[str, Any], action: str) -> bool:
    wanted = action.lower()
    if "Action" in statement:
        return any(
            "*" in (named := expand(p)) or wanted in named for p in _list(statement["Action"])
        )
    return not any(wanted in expand(p) for p in _list(statement.get("NotAction", [])))


@cache
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    )


def resource_matches(pattern: str, arn: str) -> bool:
    """IAM's resource wildcards: ``*`` any run of characters (``/`` and ``:`` too), ``?`` one."""
    return _glob(pattern).fullmatch(arn) is not None


def _names_resource(statement: Mapping[str, Any], arn: str) -> bool:
    if "Resource" in statement:
        return any(resource_matches(p, arn) for p in _list(statement["Resource"]))
    return not any(resource_matches(p, arn) for p in _list(statement.get("NotResource", [])))


def evaluate(documents: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    """Whether the policies allow ``request``: an explicit Deny wins, then an Allow."""
    if not known_action(request.action):
        return Decision(False, f"{request.action} is not an IAM action (map the operation)")
    allows: list[str] = []
    for number, document in enumerate(documents):
        for index, statement in enumerate(_list(document.get("Statement", []))):
            if not (
                _names_action(statement, request.action)
                and _names_resource(statement, request.resource)
            ):
                continue
            where = statement.get("Sid") or f"{document.get('Id', f'policy {number}')}[{index}]"
            if statement.get("Effect") == "Deny":
                return Decision(False, f"denied by {where}")
            if "Condition" not in statement:
                allows.append(where)
    if allows:
        return Decision(True, f"allowed by {', '.join(allows)}")
    return Decision(False, "no statement allows it")


def allowed_actions(documents: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every action some Allow statement names (patterns expanded), lower-cased."""
    found: set[str] = set()
    for document in documents:
        for statement in _list(document.get("Statement", [])):
            if statement.get("Effect") == "Allow":
                for pattern in _list(statement.get("Action", [])):
                    found |= expand(pattern)
    return found


def unused_grants(documents: Iterable[Mapping[str, Any]], requests: Iterable[Request]) -> list[str]:
    """Each (Allow statement, action it names, resource pattern) no request went through,
    for the actions some request used: a resource wider or other than the calls need."""
    made = list(requests)
    used = {r.action.lower() for r in made}
    unused: list[str] = []
    for number, document in enumerate(documents):
        for index, statement in enumerate(_list(document.get("Statement", []))):
            if statement.get("Effect") != "Allow" or "Resource" not in statement:
                continue
            where = statement.get("Sid") or f"{document.get('Id', f'policy {number}')}[{index}]"
            for pattern in _list(statement.get("Action", [])):
                for action in sorted(expand(pattern) & used):
                    for resource in _list(statement["Resource"]):
                        if not any(
                            r.action.lower() == action and resource_matches(resource, r.resource)
                            for r in made
                        ):
                            unused.append(f"{where}: {action} on {resource}")
    return unused


def lint(document: Mapping[str, Any]) -> list[str]:
    """parliament's findings on one policy document (empty: clean)."""
    policy = _parliament().analyze_policy_string(json.dumps(document))
    return [f"{f.issue}: {f.detail}" for f in policy.findings]
