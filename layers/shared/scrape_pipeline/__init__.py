"""Collect the results of asynchronous Geonode Scraper API jobs: none lost, none twice."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562): each name in ``homes`` imported from its module
    on first use, so a Lambda that never asks for it does not load it."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{homes[name]}"), name)

    return __getattr__
