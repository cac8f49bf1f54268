"""The docs/ pages whose tables tests read or the site's build renders."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
CONFIGURATION = DOCS / "configuration.md"
OPERATIONS = DOCS / "operations.md"
