"""Building each Lambda's logic from the environment, with real AWS clients: one module each.

    scrape_pipeline.wiring.receiver     build_receiver
    scrape_pipeline.wiring.processor    build_processor
    scrape_pipeline.wiring.reconciler   build_reconciler
    scrape_pipeline.wiring.submitter    build_inside

Each ``functions/*/app.py`` imports its own module, so a function imports only what it runs:
the receiver's cold start never pays for the processor's or the reconciler's modules. This
package therefore imports nothing itself; ``from scrape_pipeline.wiring import
build_reconciler`` (the operator CLI) still works, resolved on first use.

The resources they need (table, queue, bucket, the ledger's two knobs) are declared once in
``scrape_pipeline.resources``; each Lambda's own knobs are its settings class's
(``ReceiverSettings``, ``ProcessorSettings``, ``ReconcilerSettings``, ``InsideSettings``).

boto3 honours ``AWS_ENDPOINT_URL``, so the same wiring serves Lambda and the local stack.
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
