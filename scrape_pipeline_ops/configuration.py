"""The configuration reference, rendered from the settings' declarations at every build of the
documentation site (docs/hooks.py fills docs/configuration.md); ``SOURCES`` is its order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrape_pipeline.config.resources import (
    EVENT_BUS_NAME,
    QUEUE_URL,
    RESULTS_BUCKET,
    LedgerSettings,
)
from scrape_pipeline.config.settings import Setting, declared
from scrape_pipeline.geonode.settings import (
    GEONODE_API_KEY_SECRET_ID,
    GEONODE_SCRAPER_API_KEY,
    GeonodeSettings,
)
from scrape_pipeline.processor.settings import ProcessorSettings
from scrape_pipeline.receiver.freshness import Freshness
from scrape_pipeline.receiver.payload import FieldLocations
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline.receiver.webhook import ReceiverSettings
from scrape_pipeline.reconciler.recovery import RecoverySettings
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps.job_list import JobListSettings
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings
from scrape_pipeline.runs.inside import InsideSettings
from scrape_pipeline_ops.retry_settings import RetrySettings

SOURCES: tuple[type | Setting[Any], ...] = (
    GEONODE_SCRAPER_API_KEY,
    GEONODE_API_KEY_SECRET_ID,
    GeonodeSettings,
    RetrySettings,
    LedgerSettings,
    QUEUE_URL,
    RESULTS_BUCKET,
    EVENT_BUS_NAME,
    ReceiverSettings,
    SignatureConfig,
    FieldLocations,
    Freshness,
    ProcessorSettings,
    RecoverySettings,
    JobListSettings,
    ReconcilerSettings,
    WatchSettings,
    InsideSettings,
)


def catalogue(*sources: type | Setting[Any]) -> list[Setting[Any]]:
    """The settings of ``sources`` (settings classes, or settings read alone), each once, in
    order; ``ValueError`` when two declarations share a variable."""
    seen: dict[str, Setting[Any]] = {}
    for source in sources:
        for setting in declared(source).values() if isinstance(source, type) else (source,):
            if seen.setdefault(setting.name, setting) is not setting:
                raise ValueError(f"{setting.name} is declared twice")
    return list(seen.values())


def shown(setting: Setting[Any]) -> str:
    """The setting's default as the configuration table shows it."""
    value: object = setting.default
    if setting.required:
        return "(required)"
    if value is None or value in ("", ()):
        return "(none)"
    if isinstance(value, tuple):
        value = ",".join(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`" if isinstance(value, str) else str(value)


def markdown(settings: Iterable[Setting[Any]]) -> str:
    """The configuration table of ``settings``: variable, default, why."""
    rows = [f"| `{s.name}` | {shown(s)} | {s.reason.replace('|', '&#124;')} |" for s in settings]
    return "\n".join(["| variable | default | why |", "|---|---|---|", *rows]) + "\n"


def declared_settings() -> list[Setting[Any]]:
    """Every declared setting, once each, in the table's order."""
    return catalogue(*SOURCES)


def table() -> str:
    """The configuration table as the README shows it."""
    return markdown(declared_settings())
