"""moto in server mode on 127.0.0.1, with each AWS call atomic as it is in AWS.

moto's backends evaluate a condition and apply the write in separate steps without a lock,
so under a threaded server two conditional writes to one DynamoDB item can both succeed
(seen here: 3 of 20 racing lease takes granted). AWS guarantees per-item atomicity; this
server keeps connections concurrent but runs one backend call at a time, restoring it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, Self
from urllib.parse import SplitResult, unquote, urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.handlers import BUILTIN_HANDLERS
from moto import backends as moto_backends
from moto.core.botocore_stubber import MockRawResponse
from moto.core.serialize import BaseJSONSerializer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.s3 import models as s3_models
from moto.sqs import models as sqs_models
from werkzeug._internal import _wsgi_encoding_dance
from werkzeug.serving import ThreadedWSGIServer
from werkzeug.wrappers import Response

from scrape_pipeline_local.lifecycle import SERVE_POLL_SECONDS, Service
from scrape_pipeline_local.translate import ACCOUNT_ID, REGION

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _OneCallAtATime:
    """WSGI middleware: the whole backend call, response body included, under one lock.

    An SQS long poll (``WaitTimeSeconds`` > 0) would hold that lock for its whole wait and
    stall every other call of the stack (an ``events tail`` against ``local up`` did: minutes
    per ``submit``). It is served as short polls, each under the lock, until a message comes
    or the wait ends, as SQS answers it.
    """

    def __init__(self, app: WSGIApp) -> None:
        self._app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        wait = _long_poll(environ)
        if wait is None:
            with self.lock:
                return [b"".join(self._app(environ, start_response))]
        body, short = wait
        deadline = time.monotonic() + float(body["WaitTimeSeconds"])
        while True:
            answered = _Answer()
            environ["wsgi.input"] = io.BytesIO(short)
            with self.lock:
                reply = b"".join(self._app(environ, answered))
            if b'"Messages"' in reply or not answered.ok or time.monotonic() >= deadline:
                start_response(*answered.args)
                return [reply]
            time.sleep(LONG_POLL_STEP_SECONDS)


class _Answer:
    """A ``start_response`` that keeps its arguments, to pass on the answer that is sent."""

    def __init__(self) -> None:
        self.args: tuple[Any, ...] = ()

    def __call__(self, *args: Any) -> None:
        self.args = args

    @property
    def ok(self) -> bool:
        return bool(self.args) and str(self.args[0]).startswith("200")


# How often a long poll served as short polls asks again.
LONG_POLL_STEP_SECONDS = 0.2


def _long_poll(environ: dict[str, Any]) -> tuple[dict[str, Any], bytes] | None:
    """An SQS ``ReceiveMessage`` (JSON protocol) that waits: its request and the same request
    without the wait; None for any other call (its body left readable)."""
    if environ.get("HTTP_X_AMZ_TARGET") != "AmazonSQS.ReceiveMessage":
        return None
    raw = environ["wsgi.input"].read()
    environ["wsgi.input"] = io.BytesIO(raw)
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return None
    if not isinstance(body, dict) or not int(body.get("WaitTimeSeconds") or 0):
        return None
    short = json.dumps({**body, "WaitTimeSeconds": 0}).encode()
    environ["CONTENT_LENGTH"] = str(len(short))
    return body, short


class _Server(ThreadedWSGIServer):
    """Werkzeug's threaded server, knowing its open connections so that ``stop`` ends them:
    a kept-alive connection must not go on reaching moto once its server has stopped."""

    def __init__(self, host: str, port: int, app: WSGIApp) -> None:
        super().__init__(host, port, app, handler=_KeepAliveHandler)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def close_connections(self) -> None:
        with self.connections_lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):  # already closed by its client
                    connection.shutdown(socket.SHUT_RDWR)


class _KeepAliveHandler(MotoRequestHandler):
    """moto's request handler with HTTP/1.1 keep-alive, as AWS's endpoints keep connections.

    Werkzeug's development server closes every connection after one response, so each AWS
    call paid a TCP connect and a server thread (a tenth of a DynamoDB call's CPU here). This
    handler reads the request body whole before the call, which leaves the connection at the
    next request, and frames every response with its Content-Length. A request it cannot
    frame that way (a chunked body) is answered and its connection closed, as werkzeug does.
    """

    # The status line, headers and body leave in one write (``flush``), and without Nagle's
    # delay: a small second write would wait for the client's delayed ACK (about 40 ms).
    wbufsize = io.DEFAULT_BUFFER_SIZE

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_expect_100(self) -> bool:
        answered = super().handle_expect_100()
        self.wfile.flush()  # the client waits for it before it sends the body
        return answered

    def run_wsgi(self) -> None:
        environ = self.make_environ()
        if "wsgi.input_terminated" in environ:  # a chunked body: werkzeug's way, then close
            self.close_connection = True
        else:
            length = int(self.headers.get("Content-Length") or 0)
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(length) if length else b"")
        status, headers, body, failed = _serve(self.server.app, environ)
        self.close_connection = self.close_connection or failed
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        sent_length = None
        for name, value in headers:
            if name.lower() == "content-length":
                sent_length = int(value)
            self.send_header(name, value)
        bodiless = self.command == "HEAD" or int(code) in (204, 304) or int(code) < 200
        if sent_length is None and not bodiless:
            self.send_header("Content-Length", str(len(body)))
        elif not bodiless and sent_length != len(body):
            self.close_connection = True  # a length that frames nothing: end it there
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not bodiless:
            self.wfile.write(body)
        self.wfile.flush()

    def handle(self) -> None:
        """Serve the connection's requests until it closes, or until the server stops."""
        server = self.server
        assert isinstance(server, _Server)
        with server.connections_lock:
            server.connections.add(self.connection)
        try:
            with contextlib.suppress(OSError):  # the client, or ``stop``, closed it
                super().handle()
        finally:
            with server.connections_lock:
                server.connections.discard(self.connection)


def _serve(app: WSGIApp, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes, bool]:
    """One call through the app: status, headers, whole body, and whether moto raised."""
    answer: list[Any] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        answer[:] = [status, headers]
        return lambda data: None  # the middleware returns the whole body instead

    try:
        body = b"".join(app(environ, start_response))
    except Exception:
        path = environ.get("PATH_INFO")
        logging.getLogger(__name__).exception(
            "moto failed on %s %s", environ["REQUEST_METHOD"], path
        )
        response = Response("moto failed", status=500)
        return response.status, list(response.headers.items()), response.get_data(), True
    return answer[0], answer[1], body, False


# Servers answering this process's own boto3 calls in-process: endpoint -> app.
_DIRECT: dict[str, WSGIApp] = {}
# Whether a server answers this process's boto3 calls without a socket unless told otherwise.
# tests/conftest.py turns it on; the transport's own tests, other processes (the CLI run as a
# command, `aws`) and the benchmarks go over HTTP.
DIRECT_CALLS_DEFAULT = False
# moto runs a direct call in a thread of its own, as the server's thread did: a handler thread
# stopped at its Lambda timeout (an exception raised inside it, lambda_runtime.py) then stops
# waiting for the answer, never halfway through moto's change. Long polls take a worker each.
_DIRECT_WORKERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="moto-direct")


def _answer_directly(request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse | None:
    """botocore's ``before-send``: a call to a direct server of this process, answered by its
    app as its HTTP handler would (same dispatch, same lock), without the socket."""
    url = urlsplit(request.url)
    app = _DIRECT.get(f"{url.scheme}://{url.netloc}")
    if app is None:
        return None
    body: Any = request.body
    data = (body.read() if hasattr(body, "read") else body) or b""
    data = data.encode() if isinstance(data, str) else bytes(data)
    headers = {
        name: value.decode() if isinstance(value, bytes) else value
        for name, value in request.headers.items()
        if name.lower() != "transfer-encoding"  # framing of the socket, not of the call
    }
    environ = _environ(request.method, url, headers, data)
    status, response_headers, content, _ = _DIRECT_WORKERS.submit(_serve, app, environ).result()
    answered = HTTPHeaders()
    for name, value in response_headers:
        answered[name] = value
    raw = MockRawResponse(b"" if request.method == "HEAD" else content)
    return AWSResponse(request.url, int(status.split(" ", 1)[0]), answered, raw)


def _environ(method: str, url: SplitResult, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The WSGI environ werkzeug's server makes of this request (``make_environ``)."""
    raw = f"{url.path}?{url.query}" if url.query else url.path
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url.scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": _wsgi_encoding_dance(unquote(url.path)),
        "QUERY_STRING": _wsgi_encoding_dance(url.query),
        "REQUEST_URI": _wsgi_encoding_dance(raw),
        "RAW_URI": _wsgi_encoding_dance(raw),
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": 0,
        "SERVER_NAME": url.hostname or "127.0.0.1",
        "SERVER_PORT": str(url.port),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": url.netloc,
        "CONTENT_LENGTH": str(len(body)),
    }
    for name, value in headers.items():
        if "_" in name:
            continue
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[f"HTTP_{key}"] = value
        elif key == "CONTENT_TYPE":
            environ[key] = value
    return environ


BUILTIN_HANDLERS.append(("before-send", _answer_directly))


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


_SERIALIZE_STRUCTURE = BaseJSONSerializer._serialize_type_structure


def _wire_ready(value: Any) -> bool:
    """Already a DynamoDB AttributeValue as sent: strings, booleans, and lists and maps of them
    (no binary, which moto's serializer base64-encodes)."""
    if isinstance(value, dict):
        return all(k not in ("B", "BS") and _wire_ready(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_wire_ready(v) for v in value)
    return isinstance(value, (str, bool))


def _serialize_structure(
    self: BaseJSONSerializer, serialized: Any, value: Any, shape: Any, key: str
) -> None:
    """moto's JSON serializer, passing a wire-ready AttributeValue through whole: it walks
    each value's ten members by name and alias, most of a DynamoDB read's CPU here."""
    if key and shape.name == "AttributeValue" and _wire_ready(value):
        serialized[key] = value
        return
    _SERIALIZE_STRUCTURE(self, serialized, value, shape, key)


class MotoServer(Service):
    """Start with ``start()`` or ``with``; ``endpoint`` is the URL for ``AWS_ENDPOINT_URL``.

    With a ``clock``, SQS visibility timeouts and delays run on it (moto reads time through
    module-level helpers, patched here while the server runs): a local stack on a manual or
    scaled clock then sees messages come back when its own time says so. One per process.
    ``direct`` (default ``DIRECT_CALLS_DEFAULT``): this process's boto3 calls skip the socket.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: _Clock | None = None,
        direct: bool | None = None,
    ):
        self._host = host
        self._port = port
        self._clock = clock
        self._direct = DIRECT_CALLS_DEFAULT if direct is None else direct
        self._server: _Server | None = None
        self._app: _OneCallAtATime | None = None
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
        BaseJSONSerializer._serialize_type_structure = _serialize_structure  # type: ignore[method-assign]
        app = self._app = _OneCallAtATime(DomainDispatcherApplication(create_backend_app))
        self._server = _Server(self._host, self._port, app)
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host!s}:{port}"
        if self._direct:
            _DIRECT[self.endpoint] = app
        serve = self._server.serve_forever
        self._thread = threading.Thread(
            target=serve, kwargs={"poll_interval": SERVE_POLL_SECONDS}, daemon=True
        )
        self._thread.start()
        return self

    def reset(self) -> None:
        """Forget every resource: moto's reset API, called through the app in this process."""
        assert self._server is not None
        url = urlsplit(f"{self.endpoint}/moto-api/reset")
        status, _, body, _ = _serve(self._server.app, _environ("POST", url, {}, b""))
        if not status.startswith("200"):
            raise RuntimeError(f"moto's reset answered {status}: {body!r}")

    def may_receive(self, queue_url: str) -> bool:
        """Whether a ReceiveMessage on this queue now could return a message (moto's view).

        moto answers an empty receive only after the whole call's parsing and dispatch, and a
        stack on a manual clock polls two queues every simulated second: most of its AWS calls.
        A receive changes nothing unless a message is visible, so a poller may skip it then.
        """
        account, name = urlsplit(queue_url).path.strip("/").split("/")[-2:]
        assert self._app is not None
        with self._app.lock:
            queue = sqs_models.sqs_backends[account][REGION].queues.get(name)
            return queue is None or bool(queue.messages)

    def holds_messages(self, queue_url: str) -> bool:
        """Whether the queue holds any message: visible, in flight or delayed (moto's view)."""
        account, name = urlsplit(queue_url).path.strip("/").split("/")[-2:]
        assert self._app is not None
        with self._app.lock:
            queue = sqs_models.sqs_backends[account][REGION].queues.get(name)
            return queue is not None and bool(queue._messages)  # delayed and in flight too

    def object_versions(self, bucket: str) -> Counter[str]:
        """Object versions per key, as ListObjectVersions counts them, read from moto here.

        moto's listing deep-copies every version of the bucket (10 ms a call with a few dozen
        objects): too dear for a stop predicate at every simulated second. Judgements list.
        """
        assert self._app is not None
        with self._app.lock:
            keys = s3_models.s3_backends[ACCOUNT_ID]["aws"].buckets[bucket].keys
            counts = {
                name: sum(not isinstance(v, s3_models.FakeDeleteMarker) for v in versions)
                for name, versions in keys.iterlists()
            }
        return Counter({name: n for name, n in counts.items() if n})

    def stop(self) -> None:
        """Stop serving."""
        _DIRECT.pop(self.endpoint, None)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        moto_backends.list_of_moto_modules = _LIST_MODULES
        BaseJSONSerializer._serialize_type_structure = _SERIALIZE_STRUCTURE  # type: ignore[method-assign]
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
