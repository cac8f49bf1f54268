"""One Lambda invocation, stood in: a context with a real deadline, a timeout that stops it.

Lambda stops a function at its ``Timeout`` (wall time) whatever the code is doing. Python
threads cannot be killed, so the handler runs in a worker thread and, at the deadline, gets
``LambdaTimeout`` raised inside it (``PyThreadState_SetAsyncExc``). It derives from
``BaseException`` so the handler's own ``except Exception`` blocks cannot swallow it. The
exception lands at the thread's next Python bytecode: a thread blocked in C (a socket read)
stops when that call returns, so the invoker waits a bounded grace for it to unwind.
"""

from __future__ import annotations

import contextvars
import ctypes
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scrape_pipeline_local.aws_calls import acting_as
from scrape_pipeline_local.translate import ACCOUNT_ID, REGION

Handler = Callable[[dict[str, Any], Any], Any]
Monotonic = Callable[[], float]

# Lambda's Timeout when a function sets none.
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3.0
# The template's Globals MemorySize; Powertools reads it from the context.
MEMORY_LIMIT_MB = 256
# How long a timed-out handler may take to unwind before the invoker goes on without it.
STOP_GRACE_SECONDS = 5.0
# A thread blocked in C misses an exception raised while it waits: raise it again this often.
_RAISE_AGAIN_EVERY_SECONDS = 0.01
_MILLIS = 1000

logger = logging.getLogger(__name__)


class LambdaTimeout(BaseException):
    """Raised inside a handler that ran past its function's timeout."""


class LambdaContext:
    """The parts of a Lambda context that handlers and Powertools read, with a real deadline."""

    def __init__(
        self,
        function_name: str,
        timeout_seconds: float = LAMBDA_DEFAULT_TIMEOUT_SECONDS,
        *,
        request_id: str | None = None,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = MEMORY_LIMIT_MB
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self.aws_request_id = request_id or str(uuid.uuid4())
        self.timeout_seconds = timeout_seconds
        self._monotonic = monotonic
        self.deadline = monotonic() + timeout_seconds

    def remaining_seconds(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - self._monotonic())

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before Lambda stops this invocation."""
        return int(self.remaining_seconds() * _MILLIS)


@dataclass(frozen=True)
class Outcome:
    """How one invocation ended: a result, an error the handler raised, or a timeout."""

    request_id: str
    result: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    # The handler was still running after the grace: its thread lives on, unstoppable.
    abandoned: bool = False

    @property
    def ok(self) -> bool:
        """True when the handler returned before its deadline."""
        return self.error is None and not self.timed_out


class TimedInvoker:
    """Calls a handler as Lambda does: one context per invocation, stopped at the timeout."""

    def __init__(
        self,
        handler: Handler,
        function_name: str,
        timeout_seconds: float = LAMBDA_DEFAULT_TIMEOUT_SECONDS,
        *,
        grace_seconds: float = STOP_GRACE_SECONDS,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        self.handler = handler
        self.function_name = function_name
        self.timeout_seconds = timeout_seconds
        self._grace = grace_seconds
        self._monotonic = monotonic
        self.timeouts = 0
        self.abandoned = 0

    def invoke(self, event: dict[str, Any], *, request_id: str | None = None) -> Outcome:
        """Run the handler on ``event``; returns when it ended or was stopped at its deadline."""
        context = LambdaContext(
            self.function_name,
            self.timeout_seconds,
            request_id=request_id,
            monotonic=self._monotonic,
        )
        ended: dict[str, Any] = {}

        def run() -> None:
            try:
                # Its AWS calls are the function's (its role's), whoever invoked it.
                with acting_as(self.function_name):
                    ended["result"] = self.handler(event, context)
            except LambdaTimeout:
                ended["stopped"] = True
            except BaseException as error:  # noqa: BLE001 - reported to the caller, as Lambda does
                ended["error"] = error

        # The handler sees the caller's context variables, as it would on the calling thread.
        worker = threading.Thread(
            target=contextvars.copy_context().run,
            args=(run,),
            name=f"lambda-{self.function_name}",
            daemon=True,
        )
        worker.start()
        worker.join(context.remaining_seconds())
        if not worker.is_alive():
            return Outcome(context.aws_request_id, ended.get("result"), ended.get("error"))
        self.timeouts += 1
        stopped = _stop(worker, ended, self._grace)
        if not stopped:
            self.abandoned += 1
            logger.warning(
                "%s %s did not stop within %.1f s of its timeout; its thread lives on",
                self.function_name,
                context.aws_request_id,
                self._grace,
            )
        return Outcome(context.aws_request_id, timed_out=True, abandoned=not stopped)


class RunsAFunction:
    """What the stand-ins that invoke a function (poller, schedule, API front) report about it."""

    _invoker: TimedInvoker

    @property
    def timeout_seconds(self) -> float:
        """The function's timeout each invocation runs under."""
        return self._invoker.timeout_seconds

    @property
    def timeouts(self) -> int:
        """Invocations stopped at the function's timeout."""
        return self._invoker.timeouts


def _stop(worker: threading.Thread, ended: dict[str, Any], grace: float) -> bool:
    """Raise ``LambdaTimeout`` in ``worker`` until it ends or ``grace`` passes; True if it ended."""
    give_up_at = time.monotonic() + grace
    while worker.is_alive() and time.monotonic() < give_up_at:
        # Once the handler has unwound, a second exception would escape ``run`` itself.
        if "stopped" not in ended:
            _raise_in(worker, LambdaTimeout)
        worker.join(_RAISE_AGAIN_EVERY_SECONDS)
    return not worker.is_alive()


def _raise_in(thread: threading.Thread, exception: type[BaseException]) -> None:
    """Schedule ``exception`` in ``thread`` at its next bytecode."""
    if thread.ident is None:
        return
    ident = ctypes.c_ulong(thread.ident)
    changed = ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, ctypes.py_object(exception))
    if changed > 1:  # never expected: undo rather than hit threads we do not own
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, None)
        raise SystemError("PyThreadState_SetAsyncExc hit more than one thread")
