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
from types import TracebackType
from typing import Any, Self

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _OneCallAtATime:
    """WSGI middleware: the whole backend call, response body included, under one lock."""

    def __init__(self, app: WSGIApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            return [b"".join(self._app(environ, start_response))]


class MotoServer:
    """Start with ``start()`` or ``with``; ``endpoint`` is the URL for ``AWS_ENDPOINT_URL``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""

    def start(self) -> Self:
        """Listen and serve in a daemon thread."""
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
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
        import httpx  # noqa: PLC0415

        httpx.post(f"{self.endpoint}/moto-api/reset").raise_for_status()

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
