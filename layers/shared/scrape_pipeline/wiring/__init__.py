"""Each Lambda's logic built from the environment on real AWS clients (boto3 honours
``AWS_ENDPOINT_URL``), one module each, so a function imports only what it runs; this package
imports nothing itself and resolves ``from scrape_pipeline.wiring import build_x`` on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrape_pipeline.wiring.processor import build_processor as build_processor
    from scrape_pipeline.wiring.receiver import build_receiver as build_receiver
    from scrape_pipeline.wiring.reconciler import build_reconciler as build_reconciler
    from scrape_pipeline.wiring.submitter import build_inside as build_inside

__all__ = ["build_inside", "build_processor", "build_receiver", "build_reconciler"]

_HOMES = {
    "build_processor": "processor",
    "build_receiver": "receiver",
    "build_reconciler": "reconciler",
    "build_inside": "submitter",
}


def __getattr__(name: str) -> Any:
    """A builder, imported from its own module on first use (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
