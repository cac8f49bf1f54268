"""template.yaml, and its translation to CloudFormation by aws-sam-translator, offline.

``translate`` runs the translator in-process as ``sam validate`` does: fake S3 code URIs, a
managed-policy loader that must never be needed, region us-east-1, the parameters' defaults.
``template`` is the file as written; the other helpers read either.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"
# moto's default account: the ARNs it makes carry it.
ACCOUNT_ID = "123456789012"

TABLE = "AWS::DynamoDB::Table"
QUEUE = "AWS::SQS::Queue"
BUCKET = "AWS::S3::Bucket"
SECRET = "AWS::SecretsManager::Secret"  # noqa: S105 - a resource type # nosec B105
EVENT_BUS = "AWS::Events::EventBus"
FUNCTION = "AWS::Lambda::Function"
WEBHOOK_SECRET_ID = "WebhookSecret"  # noqa: S105 - a logical id # nosec B105
API_KEY_SECRET_ID = "GeonodeApiKeySecret"  # noqa: S105 - a logical id # nosec B105

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


def resources_of_type(translation: Mapping[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for every resource of one type."""
    return {
        logical_id: resource
        for logical_id, resource in translation["Resources"].items()
        if resource.get("Type") == type_
    }


def only_resource(translation: Mapping[str, Any], type_: str) -> tuple[str, dict[str, Any]]:
    """The one resource of a type (``TemplateError`` when there are none or several)."""
    found = resources_of_type(translation, type_)
    if len(found) != 1:
        raise TemplateError(f"expected one {type_}, found {sorted(found) or 'none'}")
    return next(iter(found.items()))
