"""An API Gateway stand-in on 127.0.0.1: HTTP requests in, REST proxy events to a handler.

Like a REST API with ``BinaryMediaTypes: ["*/*"]``, bodies reach the handler base64-encoded
and exact. As on AWS, a body over API Gateway's 10 MB, or whose event is over Lambda's 6 MB
invocation payload, gets 413 without an invocation; an invocation that fails or runs past the
function's timeout gets 502. One invocation runs at a time, as in one Lambda container
(Powertools' Logger and Metrics keep per-invocation state in module globals).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from scrape_pipeline_local.events import api_gateway_event
from scrape_pipeline_local.lambda_runtime import (
    LAMBDA_DEFAULT_TIMEOUT_SECONDS,
    LambdaContext,
    RunsAFunction,
    TimedInvoker,
)
from scrape_pipeline_local.lifecycle import SERVE_POLL_SECONDS, Service
from scrape_pipeline_local.limits import (
    API_GATEWAY_MAX_PAYLOAD_BYTES,
    LAMBDA_SYNC_MAX_PAYLOAD_BYTES,
    event_bytes,
)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

# LambdaContext moved to scrape_pipeline_local.lambda_runtime
__all__ = ["ApiGatewayFront", "LambdaContext"]

_READ_CHUNK_BYTES = 64 * 1024
_TOO_LARGE = {"statusCode": 413, "body": '{"message": "Request Entity Too Large"}'}
_LAMBDA_FAILED = {"statusCode": 502, "body": '{"message": "Internal server error"}'}


class _Server(ThreadingHTTPServer):
    # Python's default listen backlog is 5: a burst of senders got connections reset.
    request_queue_size = 128
    daemon_threads = True


class ApiGatewayFront(RunsAFunction, Service):
    """Serves ``POST /<stage>/<path>`` by calling ``handler`` with a proxy event."""

    def __init__(
        self,
        handler: Handler,
        *,
        stage: str = "v1",
        function_name: str = "receiver",
        timeout_seconds: float = LAMBDA_DEFAULT_TIMEOUT_SECONDS,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.stage = stage
        self._invoker = TimedInvoker(handler, function_name, timeout_seconds)
        self._lock = threading.Lock()
        self.invocations = 0
        self.too_large = 0  # requests answered 413 without invoking
        # Chaos: while set, every request gets this status without reaching the handler
        # (a bad deploy, a throttled or broken integration).
        self.failing_with: int | None = None
        front = self

        class Request(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                front._serve(self)

            do_GET = do_PUT = do_DELETE = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the handler logs what matters

        self._server = _Server((host, port), Request)
        self._server.daemon_threads = True
        host_, port_ = self._server.server_address[:2]
        self.base_url = f"http://{host_!s}:{port_}/{stage}"
        self._thread: threading.Thread | None = None

    def url(self, path: str) -> str:
        """The public URL of ``path`` (e.g. ``/webhooks/geonode``)."""
        return self.base_url + path

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        if length > API_GATEWAY_MAX_PAYLOAD_BYTES:
            _discard(request, length)  # read it all, or the sender sees a reset, not the 413
            self.too_large += 1
            self._answer(request, dict(_TOO_LARGE))
            return
        body = request.rfile.read(length) if length else b""
        path = request.path.split("?", 1)[0]
        prefix = f"/{self.stage}"
        if not path.startswith(prefix + "/"):
            request.send_error(403, "Missing Authentication Token")  # what API Gateway says
            return
        event = api_gateway_event(
            body,
            dict(request.headers.items()),
            path=path[len(prefix) :],
            method=request.command,
            stage=self.stage,
        )
        failing = self.failing_with
        response: dict[str, Any]
        if failing is not None:
            response = {"statusCode": failing, "body": '{"message": "Service Unavailable"}'}
        elif event_bytes(event) > LAMBDA_SYNC_MAX_PAYLOAD_BYTES:
            # Fits API Gateway but not a synchronous invoke: Lambda refuses it, never runs.
            self.too_large += 1
            response = dict(_TOO_LARGE)
        else:
            with self._lock:
                self.invocations += 1
                outcome = self._invoker.invoke(event)
            # A crashed or timed-out Lambda is a 502 at the gateway.
            response = outcome.result if outcome.ok else dict(_LAMBDA_FAILED)
        self._answer(request, response)

    def _answer(self, request: BaseHTTPRequestHandler, response: dict[str, Any]) -> None:
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
        request.send_response(int(response.get("statusCode", 200)))
        for name, value in (response.get("headers") or {}).items():
            request.send_header(name, str(value))
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def start(self) -> Self:
        """Serve in a daemon thread."""
        serve = self._server.serve_forever
        self._thread = threading.Thread(
            target=serve, kwargs={"poll_interval": SERVE_POLL_SECONDS}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def _discard(request: BaseHTTPRequestHandler, length: int) -> None:
    """Read and drop ``length`` bytes of request body."""
    while length > 0:
        chunk = request.rfile.read(min(length, _READ_CHUNK_BYTES))
        if not chunk:
            return
        length -= len(chunk)
