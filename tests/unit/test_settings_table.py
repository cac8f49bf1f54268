"""docs/configuration.md's table is the settings' declarations, rendered at every build.

The page holds only the block's markers; the site's hook (docs/hooks.py) fills them from the
declarations, so no copy can go stale. These tests render the page as the build does.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from typing import Any

import scrape_pipeline
from docs.hooks import SETTINGS_BEGIN, SETTINGS_END, with_settings
from scrape_pipeline.config.settings import Setting, declared
from scrape_pipeline_ops.configuration import SOURCES, declared_settings, table
from tests.support.readme import CONFIGURATION


def _rendered_page() -> str:
    """docs/configuration.md as the site's build renders it."""
    return with_settings(CONFIGURATION.read_text())


def _runtime_declarations() -> tuple[list[type], list[Setting[Any]]]:
    """Every settings class with declared fields, and every setting declared on its own, found
    by importing each runtime module."""
    classes: list[type] = []
    loose: list[Setting[Any]] = []
    for info in pkgutil.walk_packages(scrape_pipeline.__path__, "scrape_pipeline."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if getattr(value, "__module__", None) != info.name and not isinstance(value, Setting):
                continue  # imported from elsewhere: counted where it is defined
            if isinstance(value, Setting):
                loose.append(value)
            elif isinstance(value, type) and dataclasses.is_dataclass(value) and declared(value):
                classes.append(value)
    return classes, loose


def test_the_configuration_page_renders_the_declarations_and_keeps_no_copy():
    # GIVEN the page: its block's markers, with nothing between them to go stale
    text = CONFIGURATION.read_text()
    assert SETTINGS_BEGIN + SETTINGS_END in text, "docs/configuration.md has no empty block"
    # THEN the build puts the declarations' table there
    assert SETTINGS_BEGIN + table() + SETTINGS_END in _rendered_page()


def test_every_declared_setting_is_in_the_table():
    # GIVEN every declaration in the runtime package, in a class or on its own
    classes, loose = _runtime_declarations()
    found = {id(s): s for c in classes for s in declared(c).values()} | {id(s): s for s in loose}
    # THEN each is one the table renders (a new settings class must join SOURCES)
    listed = {id(s) for s in declared_settings()}
    missing = sorted(s.name for key, s in found.items() if key not in listed)
    assert missing == [], "declared but not in scrape_pipeline_ops.configuration.SOURCES"
    assert set(classes) <= set(SOURCES)


def test_each_variable_is_in_the_configuration_reference_once():
    # GIVEN the rendered page: the declarations' table and any rows kept by hand
    section = _rendered_page()
    rows = re.findall(r"^\| `([A-Z0-9_]+)`", section, re.MULTILINE)
    # THEN no variable has two rows (a declared one kept by hand as well, say)
    doubled = sorted({name for name in rows if rows.count(name) > 1})
    assert doubled == []
    assert {s.name for s in declared_settings()} <= set(rows)


def test_declared_classes_keep_no_table_of_their_own():
    # A docstring table beside the declarations would be the third copy the issue is about.
    for source in SOURCES:
        if isinstance(source, type):
            module = importlib.import_module(source.__module__)
            for doc in (source.__doc__ or "", module.__doc__ or ""):
                names = [s.name for s in declared(source).values() if f"| {s.name} |" in doc]
                assert names == [], f"{source.__name__}: a docstring table repeats {names}"
