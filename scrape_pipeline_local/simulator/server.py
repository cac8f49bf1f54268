"""``SimulatorServer``: the simulator on 127.0.0.1 in a background thread, as a context manager."""

from __future__ import annotations

import logging
import threading
import time

import uvicorn

from scrape_pipeline_local.lifecycle import Service
from scrape_pipeline_local.simulator.app import create_app
from scrape_pipeline_local.simulator.clocks import Clock
from scrape_pipeline_local.simulator.config import SimConfig
from scrape_pipeline_local.simulator.engine import Simulator
from scrape_pipeline_local.simulator.gateway import quiet_dropped

logging.getLogger("uvicorn.error").addFilter(quiet_dropped)


class SimulatorServer(Service):
    """Serve a Simulator over HTTP (uvicorn in a thread); ``.base_url`` and ``.sim`` once started.

    ``port=0`` picks a free port. The webhook dispatcher starts too unless the config disables it.
    """

    def __init__(
        self,
        config: SimConfig | None = None,
        clock: Clock | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.sim = Simulator(config, clock)
        self.host = host
        self.base_url = ""
        uv_config = uvicorn.Config(
            create_app(self.sim),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self._server = uvicorn.Server(uv_config)
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> SimulatorServer:
        """Start serving and return once the socket listens."""
        self._thread = threading.Thread(target=self._server.run, name="geonode-sim", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulator server did not start")
            time.sleep(0.005)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://{self.host}:{port}"
        if self.sim.config.webhook_dispatcher:
            self.sim.start()
        return self

    def stop(self) -> None:
        """Stop serving, then stop the dispatcher."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.sim.close()
