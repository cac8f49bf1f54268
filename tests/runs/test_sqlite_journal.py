"""The SQLite journal passes the journal contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline.runs.journal import Journal
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from tests.runs.journal_contract import JournalContract


class TestSqliteJournal(JournalContract):
    @pytest.fixture
    def make_journal(self, tmp_path: Path) -> Iterator[Any]:
        opened: list[SqliteJournal] = []

        def make(**kwargs: Any) -> Journal:
            opened.append(SqliteJournal(tmp_path / "state" / "journal.sqlite3", **kwargs))
            return opened[-1]

        yield make
        for journal in opened:
            journal.close()
