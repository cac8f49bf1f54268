"""Who made each AWS call: the local stack's record for checking least privilege.

In Lambda each function calls AWS under its own role; here all three run in one process, on
one moto server that enforces no IAM. So the stand-ins that run a function say whom they act
for (``acting_as``, a context variable: boto3 clients are built once per container, so the
caller is known only at call time), and a ``CallRecorder`` notes every call botocore is asked
to make, with that caller and the parameters that name a resource.

    with CallRecorder() as recorder:      # before the stack starts: sessions made after it
        stack = LocalStack(...).start()   # report to it (Powertools makes its own session)
        ...
    recorder.calls                        # Counter[Call]

The hook is botocore's public ``before-parameter-build`` event, registered through botocore's
list of built-in handlers so every session created while recording (boto3's default one, the
ones Powertools and the stack make) emits to it.

A worker thread the code starts itself (a ``ThreadPoolExecutor`` writing rows concurrently)
does not inherit context variables; its calls go to the innermost principal acting anywhere
in the process when every one acting is the same principal (the manual-clock stack runs one
function at a time), and are counted as ambiguous otherwise.
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

INVOCATION = "invocation"
EVENT_SOURCE = "event source"  # Lambda's SQS poller, which acts with the function's role

# The parameters that name the resource a call acts on (what IAM authorizes against).
RESOURCE_PARAMETERS = (
    "TableName",
    "IndexName",
    "QueueUrl",
    "QueueName",
    "QueueOwnerAWSAccountId",
    "Bucket",
    "Key",
    "VersionId",
    "SecretId",
    "StackName",
    "Rule",  # an EventBridge rule (PutTargets, RemoveTargets) ...
    "Name",  # ... or PutRule's and DeleteRule's name for it
    "EventBusName",  # the bus the rule is on
)


@dataclass(frozen=True)
class Acting:
    """On whose behalf calls are made: a function's name, and how it runs."""

    principal: str
    via: str = INVOCATION


_acting: contextvars.ContextVar[Acting | None] = contextvars.ContextVar(
    "scrape_pipeline_local_acting", default=None
)


# Every acting_as in force, in any thread, in the order entered (for threads without context).
_everywhere: list[Acting] = []
_everywhere_lock = threading.Lock()


@contextmanager
def acting_as(principal: str, via: str = INVOCATION) -> Iterator[None]:
    """AWS calls made inside (this thread, and threads started with a copy of its context)
    are attributed to ``principal``."""
    acting = Acting(principal, via)
    token = _acting.set(acting)
    with _everywhere_lock:
        _everywhere.append(acting)
    try:
        yield
    finally:
        _acting.reset(token)
        with _everywhere_lock:
            _everywhere.remove(acting)


def current() -> Acting | None:
    """Whom calls are attributed to here (None: the test harness, the stack's own set-up)."""
    return _acting.get()


def _acting_anywhere() -> tuple[Acting | None, bool]:
    """The innermost principal acting in the process, and whether that is ambiguous."""
    with _everywhere_lock:
        if not _everywhere:
            return None, False
        if len({a.principal for a in _everywhere}) > 1:
            return None, True
        return _everywhere[-1], False


@dataclass(frozen=True)
class Call:
    """One kind of AWS call: who, which operation, and the parameters naming its resource."""

    principal: str
    via: str
    service: str  # botocore's service name: dynamodb, sqs, s3, secretsmanager, ...
    operation: str  # the API operation: PutItem, SendMessageBatch, HeadObject, ...
    params: tuple[tuple[str, str], ...]  # RESOURCE_PARAMETERS present, plus the tables of
    # a batch or transaction (``RequestItems``/``TransactItems``, as ``Table:<op>`` entries)
    # and the buses of PutEvents' entries (``EventBus``)

    def param(self, name: str) -> str | None:
        """A resource parameter's value, if the call had it."""
        return dict(self.params).get(name)


def resource_params(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The parameters of a call that name its resources (``Call.params``)."""
    found = [(name, str(params[name])) for name in RESOURCE_PARAMETERS if name in params]
    for table in params.get("RequestItems") or {}:
        found.append(("Table:RequestItems", str(table)))
    for item in params.get("TransactItems") or []:
        for operation, request in item.items():
            found.append((f"Table:{operation}", str(request.get("TableName", ""))))
    # PutEvents: each entry's bus (IAM authorizes the call against every bus it names).
    for entry in params.get("Entries") or []:
        if isinstance(entry, Mapping):
            found.append(("EventBus", str(entry.get("EventBusName") or "default")))
    return tuple(dict.fromkeys(found))


class CallRecorder:
    """Counts the attributed AWS calls made while it is entered (unattributed ones apart)."""

    def __init__(self) -> None:
        self.calls: Counter[Call] = Counter()
        self.unattributed: Counter[tuple[str, str]] = Counter()
        self.ambiguous: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._recording = False
        self._spec = ("before-parameter-build", self._record)

    def __enter__(self) -> Self:
        from botocore import handlers

        self._recording = True
        handlers.BUILTIN_HANDLERS.append(self._spec)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        from botocore import handlers

        self._recording = False  # sessions made meanwhile keep the handler: it goes quiet
        if self._spec in handlers.BUILTIN_HANDLERS:
            handlers.BUILTIN_HANDLERS.remove(self._spec)

    def _record(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        if not self._recording:
            return
        service = str(model.service_model.service_name)
        acting = _acting.get()
        ambiguous = False
        if acting is None:  # a thread without the caller's context: a pool worker?
            acting, ambiguous = _acting_anywhere()
        with self._lock:
            if acting is None:
                counter = self.ambiguous if ambiguous else self.unattributed
                counter[(service, model.name)] += 1
                return
            call = Call(acting.principal, acting.via, service, model.name, resource_params(params))
            self.calls[call] += 1
