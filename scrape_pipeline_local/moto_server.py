"""moto in server mode on 127.0.0.1, with each AWS call atomic as it is in AWS.

moto's backends evaluate a condition and apply the write in separate steps without a lock,
so under a threaded server two conditional writes to one DynamoDB item can both succeed
(seen here: 3 of 20 racing lease takes granted). AWS guarantees per-item atomicity; this
server keeps connections concurrent but runs one backend call at a time, restoring it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, Self

from moto import backends as moto_backends
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.sqs import models as sqs_models
from werkzeug.serving import BaseWSGIServer, make_server

from scrape_pipeline_local.lifecycle import Service

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _OneCallAtATime:
    """WSGI middleware: the whole backend call, response body included, under one lock."""

    def __init__(self, app: WSGIApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            return [b"".join(self._app(environ, start_response))]


class _ClockTime:
    """moto's ``unix_time`` helpers, answering from an injected clock."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock

    def seconds(self, dt: Any = None) -> float:
        return self._clock.time() if dt is None else float(_ORIGINAL_UNIX_TIME(dt))

    def millis(self, dt: Any = None) -> float:
        return self.seconds(dt) * 1000.0


class _Clock(Protocol):
    def time(self) -> float: ...


# moto's SQS reads the time through these two module attributes.
_TIME_HELPERS = ("unix_time", "unix_time_millis")
_ORIGINALS: dict[str, Any] = {name: getattr(sqs_models, name) for name in _TIME_HELPERS}
_ORIGINAL_UNIX_TIME = _ORIGINALS["unix_time"]
# moto's dispatcher lists its own package directory (a listdir and some 250 stats) on every
# request to match the Host header: a quarter of an SQS receive's cost. The list never changes
# while the process runs, so the server answers it from one listing.
_LIST_MODULES = moto_backends.list_of_moto_modules


class MotoServer(Service):
    """Start with ``start()`` or ``with``; ``endpoint`` is the URL for ``AWS_ENDPOINT_URL``.

    With a ``clock``, SQS visibility timeouts and delays run on it (moto reads time through
    module-level helpers, patched here while the server runs): a local stack on a manual or
    scaled clock then sees messages come back when its own time says so. One per process.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, clock: _Clock | None = None):
        self._host = host
        self._port = port
        self._clock = clock
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""

    def start(self) -> Self:
        """Listen and serve in a daemon thread."""
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        if self._clock is not None:
            timing = _ClockTime(self._clock)
            for name, helper in zip(_TIME_HELPERS, (timing.seconds, timing.millis), strict=True):
                setattr(sqs_models, name, helper)
        modules = tuple(_LIST_MODULES())
        moto_backends.list_of_moto_modules = lambda: modules
        app = _OneCallAtATime(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            self._host, self._port, app, threaded=True, request_handler=MotoRequestHandler
        )
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def reset(self) -> None:
        """Forget every resource (moto's reset API)."""
        import httpx

        httpx.post(f"{self.endpoint}/moto-api/reset").raise_for_status()

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        moto_backends.list_of_moto_modules = _LIST_MODULES
        if self._clock is not None:
            for name, original in _ORIGINALS.items():
                setattr(sqs_models, name, original)


def forget_cached_clients() -> None:
    """boto3's default session and Powertools' providers remember an endpoint: start clean.

    Called whenever the AWS endpoint changes under a running process (a new moto server, a
    test's offline environment), so no client keeps talking to the old one.
    """
    import boto3
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import constants

    boto3.DEFAULT_SESSION = None
    parameters.clear_caches()  # type: ignore[no-untyped-call]  # Powertools leaves it untyped
    constants.DEFAULT_PROVIDERS.clear()
