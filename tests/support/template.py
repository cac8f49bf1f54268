"""The template's resources for tests: the same creators the local stack uses."""

from __future__ import annotations

from scrape_pipeline_local.create import (
    create_ledger_table,
    create_queues,
    create_results_bucket,
    create_secret,
)
from scrape_pipeline_local.moto_server import MotoServer
from scrape_pipeline_local.translate import parameter_default, properties, template

resource = properties

__all__ = [
    "create_ledger_table",
    "create_queues",
    "create_results_bucket",
    "create_secret",
    "moto_server",
    "parameter_default",
    "resource",
    "template",
]


def moto_server() -> tuple[MotoServer, str]:
    """A moto server on 127.0.0.1 (an ephemeral port); returns (server, endpoint URL)."""
    server = MotoServer().start()
    return server, server.endpoint
