"""A faithful, seeded simulator of the Geonode Scraper API, with webhooks and fault injection.

Start it with ``SimulatorServer(config, clock)`` (a context manager; ``.base_url``, ``.sim``) or
the ``geonode-sim`` command. The contract is ``shared/docs/geonode-api.md``; where it is silent:

- ``GET /v1/extract/jobs`` lists the account's async extract jobs only: sync extractions,
  batch items and crawl pages are not in it (truth queries show them all).
- Job timing and outcome are drawn from (seed, url, nth submission of that url), whichever
  route submitted it; ids are UUIDs from the same draw, so a run is reproducible.
- A cancelled crawl reads ``cancelled`` at once; its ``crawl_completed`` event goes out when
  its in-flight pages have drained.
- To run the API faster than real time, pass ``scrape_pipeline_local.clock.ScaledClock``;
  webhook retry delays and the delivery timeout are further divided by
  ``SimConfig.webhook_time_scale``.
- ``/_sim/...`` routes (no key, never counted) answer truth queries and take fault settings.
"""

from scrape_pipeline_local.simulator.app import create_app
from scrape_pipeline_local.simulator.config import FaultSettings, SimConfig
from scrape_pipeline_local.simulator.engine import JobFilter, Simulator
from scrape_pipeline_local.simulator.errors import ApiError
from scrape_pipeline_local.simulator.server import SimulatorServer
from scrape_pipeline_local.simulator.signing import sign

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
