"""A faithful, seeded simulator of the Geonode Scraper API, with webhooks and fault injection.

Start it with ``SimulatorServer(config, clock)`` (a context manager; ``.base_url``, ``.sim``) or
the ``geonode-sim`` command. The contract is ``shared/docs/geonode-api.md``; where it is silent:

- ``GET /v1/extract/jobs`` lists the account's async extract jobs only: sync extractions,
  batch items and crawl pages are not in it (truth queries show them all).
- Job timing and outcome are drawn from (seed, url, nth submission of that url), whichever
  route submitted it; ids are UUIDs from the same draw, so a run is reproducible.
- A cancelled crawl reads ``cancelled`` at once; its ``crawl_completed`` event goes out when
  its in-flight pages have drained.
- To run the API faster than real time, pass ``devstack.clock.ScaledClock``; webhook retry
  delays and the delivery timeout are further divided by ``SimConfig.webhook_time_scale``.
- ``/_sim/...`` routes (no key, never counted) answer truth queries and take fault settings.
"""

from devstack.simulator.app import create_app
from devstack.simulator.config import FaultSettings, SimConfig
from devstack.simulator.engine import JobFilter, Simulator
from devstack.simulator.errors import ApiError
from devstack.simulator.server import SimulatorServer
from devstack.simulator.signing import sign

__all__ = [
    "ApiError",
    "FaultSettings",
    "JobFilter",
    "SimConfig",
    "Simulator",
    "SimulatorServer",
    "create_app",
    "sign",
]
