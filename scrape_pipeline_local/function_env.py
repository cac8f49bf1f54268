"""Each local function sees its own environment, as each Lambda function has its own process.

The local stack runs the three handlers in one process, whose ``os.environ`` holds what they
share. What differs between them (``POWERTOOLS_SERVICE_NAME``: a Logger's ``service`` key, the
EMF ``service`` dimension the deployed alarms and dashboard read) rides on a context variable:
``os.environ`` answers from it first while a function imports or runs. A Lambda invocation runs
in a copy of its caller's context (``lambda_runtime``), so concurrent invocations of different
functions each read their own values.

    install()
    handler = with_environment(module.lambda_handler, {"POWERTOOLS_SERVICE_NAME": "receiver"})
    ...
    uninstall()
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TextIO

_CURRENT: ContextVar[Mapping[str, str] | None] = ContextVar("function_environment", default=None)
_PROCESS_ENVIRON = type(os.environ)


class _FunctionEnviron(_PROCESS_ENVIRON):  # type: ignore[misc, valid-type]
    """``os.environ``, answering first from the running function's own variables."""

    def __getitem__(self, key: str) -> str:
        own = _CURRENT.get()
        if own is not None and key in own:
            return own[key]
        return str(super().__getitem__(key))


def install() -> None:
    """Make ``os.environ`` (the same object: every reference to it) read the overlay."""
    os.environ.__class__ = _FunctionEnviron


def uninstall() -> None:
    """``os.environ`` as it was."""
    os.environ.__class__ = _PROCESS_ENVIRON


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Within the block (this context only), ``os.environ`` answers ``values`` first."""
    token = _CURRENT.set(dict(values))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def with_environment[R](
    handler: Callable[[Any, Any], R], values: Mapping[str, str]
) -> Callable[[Any, Any], R]:
    """``handler``, invoked with ``values`` in its environment."""

    def invoke(event: Any, context: Any) -> R:
        with environment(values):
            return handler(event, context)

    invoke.__wrapped__ = handler  # type: ignore[attr-defined]
    return invoke


@contextlib.contextmanager
def functions_write_to(log: TextIO) -> Iterator[None]:
    """Within the block, stdout, Python warnings and unhandled log records go to ``log``.

    In Lambda a function's stdout (Powertools' log lines and EMF records), its warnings
    (Powertools' "No application metrics to publish") and the records of loggers without a
    handler (the runtime's own handler takes them) go to CloudWatch Logs, not to whoever invoked
    it. Import the handlers inside the block: a Logger binds its stream at import.
    """
    shown = warnings.showwarning
    last_resort = logging.lastResort
    logging.lastResort = logging.StreamHandler(log)
    logging.lastResort.setLevel(logging.WARNING)

    def show(  # noqa: PLR0917 - warnings.showwarning's own signature
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show
    try:
        with contextlib.redirect_stdout(log):
            yield
    finally:
        warnings.showwarning = shown
        logging.lastResort = last_resort
