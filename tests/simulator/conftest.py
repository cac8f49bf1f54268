"""Simulator test fixtures: a ManualClock, real servers on 127.0.0.1, a webhook receiver."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer

KEY = "sim-key-1"
OTHER_KEY = "sim-key-2"
# Predictable defaults for tests: no failures, no rate limit, short jobs.
TEST_DEFAULTS: dict[str, Any] = {
    "seed": 7,
    "rate_limit_per_s": 0,
    "retryable_failure_rate": 0.0,
    "permanent_failure_rate": 0.0,
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


MakeServer = Callable[..., SimulatorServer]


@pytest.fixture(scope="session")
def stoppers() -> Iterator[list[threading.Thread]]:
    """Servers stop in the background (uvicorn takes ~0.2 s); all are joined at the end."""
    threads: list[threading.Thread] = []
    yield threads
    for thread in threads:
        thread.join(timeout=15)


@pytest.fixture
def make_server(clock: ManualClock, stoppers: list[threading.Thread]) -> Iterator[MakeServer]:
    """Start a SimulatorServer with ``TEST_DEFAULTS`` plus overrides; all are stopped afterwards."""
    started: list[SimulatorServer] = []

    def make(**overrides: Any) -> SimulatorServer:
        server = SimulatorServer(SimConfig(**{**TEST_DEFAULTS, **overrides}), clock).start()
        started.append(server)
        return server

    yield make
    for server in started:
        stopper = threading.Thread(target=server.stop, daemon=True)
        stopper.start()
        stoppers.append(stopper)


@pytest.fixture
def server(make_server: MakeServer) -> SimulatorServer:
    return make_server()


@pytest.fixture
def make_client() -> Iterator[Callable[..., httpx.Client]]:
    """``make_client(server, key=KEY)``: an httpx client for the server, closed afterwards."""
    clients: list[httpx.Client] = []

    def make(server: SimulatorServer, key: str | None = KEY) -> httpx.Client:
        headers = {"X-Api-Key": key} if key is not None else {}
        client = httpx.Client(
            base_url=server.base_url, headers=headers, timeout=10.0, trust_env=False
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def api(server: SimulatorServer, make_client: Callable[..., httpx.Client]) -> httpx.Client:
    return make_client(server)


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A webhook endpoint on 127.0.0.1 that records requests and answers planned statuses."""

    url: str
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # consumed one per request
    default_status: int = 200
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else self.default_status


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    recv = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            with recv.lock:
                recv.requests.append(Received(self.path, headers, body))
            if recv.delay_s:
                time.sleep(recv.delay_s)
            status = recv.next_status()
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128  # the default 5 overflows under parallel sends: 1 s SYN retries

    httpd = Server(("127.0.0.1", 0), Handler)
    recv.url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield recv
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def settle(clock: ManualClock) -> Callable[[SimulatorServer, float], None]:
    """``settle(server, seconds)``: advance the clock, then deliver everything that falls due."""

    def run(server: SimulatorServer, seconds: float) -> None:
        clock.advance(seconds)
        assert server.sim.drain(timeout=10.0)

    return run
