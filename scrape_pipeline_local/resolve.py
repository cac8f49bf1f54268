"""Intrinsic functions, evaluated locally: Ref, Fn::GetAtt, Fn::Sub, Fn::If and the rest.

``Resolver`` resolves parameters to their defaults and resources to what was created for them
(``Physical``); ``references`` lists the names a value refers to, which orders creation and
finds the job queue's dead-letter queue.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline_local.translate import (
    ACCOUNT_ID,
    QUEUE,
    REGION,
    TemplateError,
    parameter_defaults,
    resources_of_type,
)


class Unresolvable(Exception):
    """An intrinsic the local resolver cannot evaluate (e.g. a reference to a skipped resource)."""


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
                return str(delimiter).join(scalar_text(item) for item in self._resolve(items))
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
                return scalar_text(local[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self._get_att(logical_id, attribute)
            return scalar_text(self._ref(name))

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
                left, right = (scalar_text(self._resolve(item)) for item in arg)
                return left == right
        raise Unresolvable(f"condition {value!r} is not evaluated locally")


def scalar_text(value: Any) -> str:
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


def job_queue(translation: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The job queue: the queue with a RedrivePolicy that the functions' QUEUE_URL names."""
    redriven = {
        logical_id: resource
        for logical_id, resource in resources_of_type(translation, QUEUE).items()
        if "RedrivePolicy" in resource.get("Properties", {})
    }
    named: set[str] = set()
    for function in resources_of_type(translation, "AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        named |= references(variables.get("QUEUE_URL"))
    found = {logical_id: redriven[logical_id] for logical_id in named & set(redriven)}
    if len(found) != 1:
        raise TemplateError(
            f"expected one queue with a RedrivePolicy named by QUEUE_URL, found {sorted(found)}"
        )
    return next(iter(found.items()))


def queue_of_function(translation: Mapping[str, Any], function: str) -> str:
    """The logical id of the one queue whose event source mapping invokes ``function``."""
    queues = set(resources_of_type(translation, QUEUE))
    found = {
        name
        for mapping in resources_of_type(translation, "AWS::Lambda::EventSourceMapping").values()
        if function in references(mapping["Properties"].get("FunctionName"))
        for name in references(mapping["Properties"].get("EventSourceArn")) & queues
    }
    if len(found) != 1:
        raise TemplateError(f"expected one queue invoking {function}, found {sorted(found)}")
    return found.pop()


def dead_letter_queue(translation: Mapping[str, Any]) -> str:
    """The logical id of the job queue's redrive target."""
    _, queue = job_queue(translation)
    target = queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]
    names = references(target) & set(resources_of_type(translation, QUEUE))
    if len(names) != 1:
        raise TemplateError(f"the job queue's deadLetterTargetArn names no queue: {target!r}")
    return names.pop()
