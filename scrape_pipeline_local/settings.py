"""What the local stack reads from the functions' wiring in the translated template.

``local_settings``: the SQS event source's batch size and window, the reconciler's schedule in
seconds and Lambda's retries of a failed run, the functions' timeouts and their environment
resolved against the created resources.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from scrape_pipeline_local.resolve import (
    Resolver,
    Unresolvable,
    job_queue,
    queue_of_function,
    references,
    scalar_text,
)
from scrape_pipeline_local.scheduler import DEFAULT_ASYNC_RETRIES
from scrape_pipeline_local.translate import (
    FUNCTION,
    TemplateError,
    only_resource,
    resources_of_type,
)

if TYPE_CHECKING:
    from scrape_pipeline_local.create import StackResources


class EventSourceSettings(TypedDict):
    """A function invoked by an SQS event source of its own (the submitter)."""

    queue_url: str  # the created queue's URL ("" without the created resources)
    batch_size: int  # the mapping's BatchSize
    timeout: int  # the function's resolved Timeout


class LocalSettings(TypedDict):
    """What the local stack takes from the functions' wiring in the translated template."""

    batch_size: int  # the SQS event source mapping's BatchSize
    batching_window_seconds: int  # its MaximumBatchingWindowInSeconds (0 when unset)
    reconcile_schedule: str  # the EventBridge rule's ScheduleExpression
    reconcile_interval: float  # that expression in seconds
    reconciler_retries: int  # its target's EventInvokeConfig MaximumRetryAttempts (Lambda's 2)
    function_timeouts: dict[str, int]  # logical id -> the function's resolved Timeout
    processor_timeout: int  # the Timeout of the event source mapping's function
    reconciler_timeout: int  # the Timeout of the scheduled rule's target
    receiver_timeout: int  # the Timeout of the function the REST API integrates
    submitter: EventSourceSettings  # SubmitterFunction and the queue that invokes it
    env: dict[str, str]  # the functions' variables that agree across functions
    function_env: dict[str, dict[str, str]]  # logical id -> that function's resolved variables
    unresolved: NotRequired[dict[str, str]]  # variable -> why it was left out


# Lambda's defaults when the template leaves them out.
_DEFAULT_SQS_BATCH_SIZE = 10
_DEFAULT_FUNCTION_TIMEOUT = 3
SUBMITTER = "SubmitterFunction"

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
    schedule = scalar_text(resolver.resolve(rules[0]["ScheduleExpression"]))
    timeouts = function_timeouts(translation)
    reconciler = _function_named(timeouts, "the rule", rules[0]["Targets"])
    api_id, api = only_resource(translation, "AWS::ApiGateway::RestApi")
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
        reconciler_retries=async_retries(translation, reconciler),
        function_timeouts=timeouts,
        processor_timeout=timeouts[_function_named(timeouts, "the SQS mapping", mappings[0])],
        reconciler_timeout=timeouts[reconciler],
        receiver_timeout=timeouts[_function_named(timeouts, api_id, api.get("Properties", {}))],
        submitter=_event_source(translation, resolver, SUBMITTER, timeouts[SUBMITTER], resources),
        env={name: seen.pop() for name, seen in sorted(values.items()) if len(seen) == 1},
        function_env=function_env,
    )
    if unresolved:
        settings["unresolved"] = unresolved
    return settings


def _event_source(
    translation: Mapping[str, Any],
    resolver: Resolver,
    function: str,
    timeout: int,
    resources: StackResources | None,
) -> EventSourceSettings:
    queue_id = queue_of_function(translation, function)
    [mapping] = [
        resource["Properties"]
        for resource in resources_of_type(translation, "AWS::Lambda::EventSourceMapping").values()
        if function in references(resource["Properties"].get("FunctionName"))
    ]
    created = resources.created.get(queue_id) if resources else None
    return EventSourceSettings(
        queue_url=created.ref if created else "",
        batch_size=int(resolver.resolve(mapping.get("BatchSize")) or _DEFAULT_SQS_BATCH_SIZE),
        timeout=timeout,
    )


def function_timeouts(translation: Mapping[str, Any]) -> dict[str, int]:
    """Logical id -> each function's Timeout in seconds, parameters at their defaults."""
    resolver = Resolver(translation)
    return {
        logical_id: int(
            resolver.resolve(resource["Properties"].get("Timeout", _DEFAULT_FUNCTION_TIMEOUT))
        )
        for logical_id, resource in resources_of_type(translation, FUNCTION).items()
    }


def async_retries(translation: Mapping[str, Any], function: str) -> int:
    """Lambda's retries of a function's failed asynchronous invocation (its EventInvokeConfig)."""
    configs = [
        resource["Properties"]
        for resource in resources_of_type(translation, "AWS::Lambda::EventInvokeConfig").values()
        if function in references(resource["Properties"].get("FunctionName"))
    ]
    if not configs or "MaximumRetryAttempts" not in configs[0]:
        return DEFAULT_ASYNC_RETRIES
    return int(Resolver(translation).resolve(configs[0]["MaximumRetryAttempts"]))


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
                resolved[name] = scalar_text(resolver.resolve(value))
            except Unresolvable as error:
                unresolved[name] = str(error)
        function_env[logical_id] = resolved
    return function_env, unresolved
