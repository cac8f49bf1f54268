"""The README's configuration table is the settings' declarations, rendered.

A declaration changed, added or removed must show as a diff of the README's table. After a
deliberate change, rewrite it:

    UPDATE_SETTINGS_TABLE=1 .venv/bin/python -m pytest -n 0 tests/unit/test_settings_table.py
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import re
from typing import Any

import scrape_pipeline
from scrape_pipeline.settings import Setting, declared
from scrape_pipeline_ops.configuration import SOURCES, declared_settings, table
from tests.support.readme import README, check_readme_block

BEGIN = "<!-- settings: rendered from the declarations, checked by tests -->\n"
END = "<!-- /settings -->\n"
UPDATE = "UPDATE_SETTINGS_TABLE=1 .venv/bin/python -m pytest -n 0 tests/unit/test_settings_table.py"


def _configuration_section(text: str) -> str:
    start = text.index("## Configuration reference")
    return text[start : text.index("\n## ", start + 1)]


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


def test_readme_configuration_table_is_rendered_from_the_declarations():
    # A declaration changed without the README following fails here, naming UPDATE.
    update = bool(os.environ.get("UPDATE_SETTINGS_TABLE"))
    check_readme_block(BEGIN, END, table(), update=update, fix=UPDATE)


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
    # GIVEN the README's configuration section: the rendered table and the rows kept by hand
    section = _configuration_section(README.read_text())
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
