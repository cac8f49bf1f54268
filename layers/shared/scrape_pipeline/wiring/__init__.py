"""Each Lambda's logic built from the environment on real AWS clients (boto3 honours
``AWS_ENDPOINT_URL``), one module each, so a function imports only what it runs; this package
imports nothing itself and resolves ``from scrape_pipeline.wiring import build_x`` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrape_pipeline import lazy_exports

if TYPE_CHECKING:
    from scrape_pipeline.wiring.processor import build_processor as build_processor
    from scrape_pipeline.wiring.receiver import build_receiver as build_receiver
    from scrape_pipeline.wiring.reconciler import build_reconciler as build_reconciler
    from scrape_pipeline.wiring.submitter import build_inside as build_inside

__all__ = ["build_inside", "build_processor", "build_receiver", "build_reconciler"]

__getattr__ = lazy_exports(
    __name__,
    {
        "build_processor": "processor",
        "build_receiver": "receiver",
        "build_reconciler": "reconciler",
        "build_inside": "submitter",
    },
)
