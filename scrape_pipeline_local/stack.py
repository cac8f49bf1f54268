"""The whole pipeline on one machine: moto, the simulator, an API front, SQS pollers, a schedule.

The Lambda handlers run unchanged (``functions/*/app.py``), pointed at moto through
``AWS_ENDPOINT_URL`` and at the simulator through ``GEONODE_BASE_URL``. Webhook subscriptions
are created through the API as a user would, and their secrets stored in the local Secrets
Manager. Time is one clock for all: SQS visibility, the simulator's jobs and deliveries, the
ledger's leases and the reconciler's schedule. A run file uploaded to the bucket's
``submissions/`` reaches the submitter through moto's own S3 notification to the submissions
queue, which a second poller feeds to the submitter under its timeout (``submissions``).

    stack = LocalStack(ManualClock(), SimConfig(...)).start()
    stack.step(1.0)          # deliver what is due, process the queue, tick the schedule, advance
    stack.stop()
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from types import ModuleType
from typing import Any, Self

import boto3

from scrape_pipeline.clock import use_clock
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.receiver.signatures.secret import WebhookSecret, WebhookSecrets
from scrape_pipeline_local import function_env
from scrape_pipeline_local.apigw import ApiGatewayFront
from scrape_pipeline_local.boto_sessions import new_session
from scrape_pipeline_local.create import StackResources, create_all
from scrape_pipeline_local.lambda_runtime import Outcome, TimedInvoker
from scrape_pipeline_local.lifecycle import Service
from scrape_pipeline_local.moto_server import MotoServer
from scrape_pipeline_local.scheduler import Schedule
from scrape_pipeline_local.settings import LocalSettings, local_settings
from scrape_pipeline_local.simulator import SimConfig, Simulator, SimulatorServer
from scrape_pipeline_local.sqs_poller import SqsEventSource
from scrape_pipeline_local.translate import ROOT, TemplateError, translate
from scrape_pipeline_ops.geonode_admin import AdminClient
from scrape_pipeline_ops.rotation import render_bundle

_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
HANDLERS = ("receiver", "processor", "reconciler", "submitter")  # functions/<name>/app.py
EVENT_TYPES = ("extract_completed", "batch_completed", "crawl_completed")
API_KEY = "local-stack-key"
# Scheme names of the receiver's verifier and of the simulator's signer.
_SIM_SCHEME = {
    "geonode": "geonode",
    "standard_webhooks": "standard_webhooks",
    "stripe": "stripe",
    "github": "github",
}


@dataclass
class StackSettings:
    """How the stack is put together; a None takes the value template.yaml gives."""

    reconcile_interval: float | None = None  # the reconciler's schedule, in seconds
    batch_size: int | None = None  # the SQS event source's BatchSize
    batching_window_seconds: float | None = None  # its MaximumBatchingWindowInSeconds
    # Each function's Timeout in seconds (wall time, as in Lambda).
    receiver_timeout: float | None = None
    processor_timeout: float | None = None
    reconciler_timeout: float | None = None
    submitter_timeout: float | None = None
    reconciler_retries: int | None = None  # Lambda's retries of a failed scheduled run
    signature_scheme: str = "geonode"
    webhooks: bool = True  # subscribe the three event types through the API
    env: dict[str, str] = field(default_factory=dict)  # extra Lambda settings
    # Fixed ports on 127.0.0.1 (0: a free one at every start).
    front_port: int = 0
    simulator_port: int = 0
    moto_port: int = 0


class LocalStack(Service):
    """Starts, drives and stops every part; ``handlers`` are the real Lambda modules."""

    def __init__(
        self,
        clock: Any,
        sim_config: SimConfig | None = None,
        settings: StackSettings | None = None,
    ) -> None:
        self.clock = clock
        self.settings = settings or StackSettings()
        base = sim_config or SimConfig()
        self.sim_config = replace(
            base,
            api_keys=(API_KEY,),
            signature_scheme=_SIM_SCHEME[self.settings.signature_scheme],  # type: ignore[arg-type]
        )
        self.moto: MotoServer | None = None
        self.simulator: SimulatorServer | None = None
        self.front: ApiGatewayFront | None = None
        self.poller: SqsEventSource | None = None
        self.submissions: SqsEventSource | None = None  # the submitter's event source
        self._submissions_queue = ""
        self.schedule: Schedule | None = None
        self.resources: StackResources | None = None
        self.webhook_ids: dict[str, str] = {}
        self.handlers: dict[str, ModuleType] = {}
        # Handler name -> how the stand-ins invoke it: with its own environment and timeout.
        self._invokers: dict[str, TimedInvoker] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Bring every part up on 127.0.0.1; a part that fails takes down those already up."""
        try:
            return self._start()
        except BaseException:
            self.stop()  # no server left running, no environment left behind
            raise

    def _start(self) -> Self:
        use_clock(self.clock)
        self.moto = MotoServer(port=self.settings.moto_port, clock=self.clock).start()
        self.moto.reset()  # moto's backends are per process, not per server
        self._set_env(
            {
                "AWS_ENDPOINT_URL": self.moto.endpoint,
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",  # moto's dummy credentials # nosec B105
                "POWERTOOLS_METRICS_NAMESPACE": os.environ.get(
                    "POWERTOOLS_METRICS_NAMESPACE", "ScrapePipelineLocal"
                ),
            }
        )
        session = new_session()
        self.resources = create_all(session, api_key=API_KEY)
        self.simulator = SimulatorServer(
            self.sim_config, self.clock, port=self.settings.simulator_port
        ).start()
        wiring = local_settings(translate(), self.resources)
        # The template's variables first (what a deployed function has), unless the caller's
        # environment already says otherwise; then what this stack must override.
        self._set_env(
            {name: value for name, value in wiring["env"].items() if name not in os.environ}
        )
        self._set_env(
            {
                **self.resources.environment(),
                "GEONODE_BASE_URL": self.simulator.base_url,
                "SIGNATURE_SCHEME": self.settings.signature_scheme,
                **self.settings.env,
            }
        )
        _forget_powertools_clients()
        own = _own_environments(wiring)
        function_env.install()
        self.handlers = {name: _load_handler(name, own[name]) for name in HANDLERS}
        invoke = {
            name: function_env.with_environment(module.lambda_handler, own[name])
            for name, module in self.handlers.items()
        }
        for module in self.handlers.values():
            for reset in ("reset_receiver", "reset_processor", "reset_reconciler", "reset_inside"):
                if hasattr(module, reset):
                    getattr(module, reset)()
        self.front = ApiGatewayFront(
            invoke["receiver"],
            timeout_seconds=_chosen(self.settings.receiver_timeout, wiring["receiver_timeout"]),
            port=self.settings.front_port,
        ).start()
        self.poller = SqsEventSource(
            session.client("sqs"),
            self.resources.queue_url,
            invoke["processor"],
            batch_size=_chosen(self.settings.batch_size, wiring["batch_size"]),
            batching_window_seconds=_chosen(
                self.settings.batching_window_seconds, wiring["batching_window_seconds"]
            ),
            timeout_seconds=_chosen(self.settings.processor_timeout, wiring["processor_timeout"]),
            clock=self.clock,
            may_receive=partial(self.moto.may_receive, self.resources.queue_url),
        )
        self._submissions_queue = wiring["submitter"]["queue_url"]
        self.submissions = SqsEventSource(
            session.client("sqs"),
            self._submissions_queue,
            invoke["submitter"],
            batch_size=wiring["submitter"]["batch_size"],
            timeout_seconds=_chosen(
                self.settings.submitter_timeout, wiring["submitter"]["timeout"]
            ),
            clock=self.clock,
            function_name="submitter",
            may_receive=partial(self.moto.may_receive, wiring["submitter"]["queue_url"]),
        )
        self.schedule = Schedule(
            invoke["reconciler"],
            _chosen(self.settings.reconcile_interval, wiring["reconcile_interval"]),
            self.clock,
            timeout_seconds=_chosen(self.settings.reconciler_timeout, wiring["reconciler_timeout"]),
            max_retries=_chosen(self.settings.reconciler_retries, wiring["reconciler_retries"]),
        )
        self._invokers = {
            name: TimedInvoker(invoke[name], name, timeout)
            for name, timeout in (
                ("receiver", self.front.timeout_seconds),
                ("processor", self.poller.timeout_seconds),
                ("reconciler", self.schedule.timeout_seconds),
                ("submitter", self.submissions.timeout_seconds),
            )
        }
        if self.settings.webhooks:
            self.subscribe()
        return self

    def stop(self) -> None:
        """Tear everything down and restore the environment."""
        for part in (self.poller, self.submissions, self.schedule):
            if part is not None:
                part.stop()
        if self.front is not None:
            self.front.stop()
        if self.simulator is not None:
            self.simulator.stop()
        if self.moto is not None:
            self.moto.stop()
        _ENV.release(self)
        function_env.uninstall()
        use_clock(None)

    @property
    def sim(self) -> Simulator:
        """The simulator's in-process object: truth and faults."""
        if self.simulator is None:
            raise RuntimeError("the stack is not started")
        return self.simulator.sim

    def invoke(self, function: str, event: dict[str, Any]) -> Outcome:
        """One invocation, as ``sam local invoke <function> -e <event>`` runs it.

        ``function``: a logical id (``ReceiverFunction``) or a handler name (``receiver``).
        The function runs under its own environment and timeout, as the stand-ins run it.
        """
        name = function.removesuffix("Function").lower()
        if name not in self._invokers:
            raise KeyError(f"no function {function!r}: {', '.join(HANDLERS)}")
        return self._invokers[name].invoke(event)

    # -- as a user would -------------------------------------------------------------------

    def client(self, **kwargs: Any) -> AdminClient:
        """An API client for the simulator, on the stack's clock."""
        assert self.simulator is not None
        kwargs.setdefault("retry", RetryPolicy(max_attempts=6, deadline=120))
        return AdminClient(API_KEY, base_url=self.simulator.base_url, clock=self.clock, **kwargs)

    def subscribe(self) -> None:
        """Register the receiver for every event type and store the secrets, as an operator."""
        assert self.front is not None
        client = self.client()
        url = self.front.url("/webhooks/geonode")
        secrets: dict[str, tuple[WebhookSecret, ...]] = {}
        for event_type in EVENT_TYPES:
            hook = client.create_webhook(url, event_type, description="local stack")
            self.webhook_ids[event_type] = hook.id
            assert hook.secret is not None
            secrets[hook.id] = (WebhookSecret(hook.secret),)
        self.store_secrets(WebhookSecrets(secrets))

    def store_secrets(self, secrets: WebhookSecrets) -> None:
        """Write the webhook secret bundle (per subscription, or shared: an old flat bundle)."""
        assert self.resources is not None
        boto3.client("secretsmanager").put_secret_value(
            SecretId=self.resources.webhook_secret_arn, SecretString=render_bundle(secrets)
        )

    # -- driving time ----------------------------------------------------------------------

    def step(self, seconds: float) -> None:
        """Deliver what is due, process the queue, run the schedule if due, then advance."""
        self.settle_now()
        self.clock.advance(seconds)

    def settle_now(self) -> None:
        """Everything due at this instant: deliveries, queue messages, the schedule.

        A partial batch inside its batching window is not due: the poller holds it and a
        later call, once ``step`` has moved the clock past the window, invokes it.
        """
        assert self.simulator is not None and self.poller is not None and self.schedule is not None
        assert self.submissions is not None
        for _ in range(20):
            self.simulator.sim.drain(timeout=30)
            handled = self.poller.drain() + self.submissions.drain()
            ran = self.schedule.tick()
            if not handled and not ran and self.simulator.sim.next_due() is None:
                return
            if not handled and not ran:
                due = self.simulator.sim.next_due()
                if due is not None and due > self.clock.time():
                    return

    def quiet_until(self) -> float:
        """The clock time before which nothing falls due but the schedule's own runs: the next
        settlement or webhook attempt, Lambda retry, or end of a job's GET fault; now while
        a queue holds a message. The simulator's answers cannot change before it."""
        assert self.simulator is not None and self.schedule is not None and self.moto is not None
        assert self.resources is not None
        now = float(self.clock.time())
        queues = (self.resources.queue_url, self._submissions_queue)
        if any(self.moto.holds_messages(url) for url in queues):
            return now
        faults = self.simulator.sim.faults.sick_jobs().values()
        due = [self.simulator.sim.next_due(), self.schedule.retry_due()]
        due += [fault.until for fault in faults if fault.until > now]
        return min((at for at in due if at is not None), default=float("inf"))

    def run_until(
        self, done: Callable[[], bool], *, step: float = 1.0, limit: float = 7200.0
    ) -> float:
        """Step until ``done()``; returns the simulated seconds it took. Raises after ``limit``."""
        started = self.clock.time()
        while not done():
            if self.clock.time() - started > limit:
                raise TimeoutError(f"not done after {limit:.0f} simulated seconds")
            self.step(step)
        return float(self.clock.time() - started)

    # -- environment -----------------------------------------------------------------------

    def _set_env(self, values: Mapping[str, str]) -> None:
        _ENV.hold(self, values)


class _ProcessEnvironment:
    """The variables local stacks set in this process, and what they were before the first.

    Stacks may overlap (a test holding two): each one's stop restoring what it saw at its
    start would, stopped out of order, leave the other's endpoints behind for later tests. So
    the values from before the first stack come back when the last one stops.
    """

    def __init__(self) -> None:
        self._held: dict[int, set[str]] = {}  # id(holder) -> the names it set
        self._before: dict[str, str | None] = {}

    def hold(self, holder: object, values: Mapping[str, str]) -> None:
        names = self._held.setdefault(id(holder), set())
        for name, value in values.items():
            self._before.setdefault(name, os.environ.get(name))
            os.environ[name] = value
            names.add(name)

    def release(self, holder: object) -> None:
        """Restore what ``holder`` set that no stack still running has set too."""
        names = self._held.pop(id(holder), set())
        still = set().union(*self._held.values())
        for name in names - still:
            value = self._before.pop(name, None)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_ENV = _ProcessEnvironment()


def _chosen[T](override: T | None, from_template: T) -> T:
    """A setting's override, else the template's value."""
    return from_template if override is None else override


def _forget_powertools_clients() -> None:
    """Clients and values cached per process point at the previous stack's endpoint: drop them."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import constants

    parameters.clear_caches()  # type: ignore[no-untyped-call]
    constants.DEFAULT_PROVIDERS.clear()
    # boto3's default session resolves AWS_ENDPOINT_URL once: a new stack needs a new one (made
    # here, once the stack's endpoint is in the environment, on the models already parsed).
    boto3.DEFAULT_SESSION = new_session()


def _own_environments(wiring: LocalSettings) -> dict[str, dict[str, str]]:
    """Handler name -> the variables the template gives that function alone a value of.

    What every function agrees on is in the process environment (``wiring["env"]``); what
    differs (POWERTOOLS_SERVICE_NAME) is each function's own, read through ``function_env``.
    """
    own: dict[str, dict[str, str]] = {}
    for name in HANDLERS:
        logical_id = f"{name.capitalize()}Function"
        variables = wiring["function_env"].get(logical_id)
        if variables is None or _SERVICE_NAME not in variables:
            raise TemplateError(f"{logical_id} sets no {_SERVICE_NAME}")
        own[name] = {k: v for k, v in variables.items() if k not in wiring["env"]}
    return own


def _load_handler(name: str, own: Mapping[str, str]) -> ModuleType:
    """``functions/<name>/app.py`` as its own container: its service name and metric set.

    In Lambda each function has its own process: Powertools' Logger and Metrics read
    POWERTOOLS_SERVICE_NAME at import, and every Metrics instance of a process shares one
    metric set. Here the three functions share a process, so each module is imported under
    its own variables (again, if an earlier import saw another service name), and its Metrics
    gets a metric set of its own: every EMF record carries the `service` dimension the
    deployed alarms and dashboard read.
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    service = own[_SERVICE_NAME]
    with function_env.environment(own):
        module = importlib.import_module(f"functions.{name}.app")
        if getattr(module.logger, "service", service) != service:
            module = importlib.reload(module)
    _own_metric_set(module.metrics, service)
    return module


def _own_metric_set(metrics: Any, service: str) -> None:
    """Give one function's Metrics the set a process of its own would have."""
    provider = metrics.provider
    provider.service = service
    provider.metric_set = metrics.metric_set = {}
    provider.dimension_set = metrics.dimension_set = {}
    provider.metadata_set = metrics.metadata_set = {}
    provider.default_dimensions = metrics.default_dimensions = {}
