"""The layer's package holds what the functions import, transitively, and nothing more.

The operator tools (``scrape_pipeline_ops``) and the local stack live outside ``layers/``; ruff's
banned-api rule (pyproject.toml) keeps runtime code from importing them. This test keeps the
other direction: operator-only code put inside the layer's package fails here.
"""

from __future__ import annotations

from tests.support.runtime_imports import LAYER_ROOT, RUNTIME, runtime_closure


def test_runtime_package_is_exactly_what_the_handlers_import():
    # GIVEN the modules the handlers reach, following imports from functions/*/app.py
    reached = set(runtime_closure().values())
    # WHEN the layer's package is listed
    shipped = set((LAYER_ROOT / RUNTIME).rglob("*.py"))
    # THEN every module in it is one a handler reaches
    unused = sorted(str(p.relative_to(LAYER_ROOT)) for p in shipped - reached)
    assert unused == [], "not imported by any function: move it to scrape_pipeline_ops"


def test_layer_directory_holds_the_package_its_requirements_and_build_only():
    # GIVEN the layer's ContentUri, whose Makefile `sam build` runs
    entries = {p.name for p in LAYER_ROOT.iterdir() if p.name != "__pycache__"}
    # THEN nothing beside the runtime package, its requirements (what it names, and the lock
    # it installs) and the Makefile that installs and compiles both (tests/template/
    # test_sam_build.py checks what it ships)
    assert entries == {RUNTIME, "requirements.in", "requirements.txt", "Makefile"}
