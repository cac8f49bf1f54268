"""The run journal in one SQLite file, for people who submit from a terminal without a stack.

Each move is one ``UPDATE ... WHERE state IN (...) AND <guard>``: SQLite runs it atomically
and the row count says whether it moved, so two submitters on one file (two terminals, a
cron job overlapping a manual rerun) cannot both claim an entry. A run is planned in one
transaction: a crash while planning leaves no half-planned run.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from scrape_pipeline.runs.journal import DEFAULT_LEASE_S, FIELDS, Entry, Journal
from scrape_pipeline.runs.moves import EntryState, Guard, Move
from scrape_pipeline.runs.plan import Run, RunMode

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS runs (
    name TEXT PRIMARY KEY, mode TEXT NOT NULL, fingerprint TEXT NOT NULL,
    options TEXT NOT NULL, entries INTEGER NOT NULL, urls INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    run TEXT NOT NULL, idx INTEGER NOT NULL, urls TEXT NOT NULL, state TEXT NOT NULL,
    job_id TEXT, reason TEXT, owner TEXT, lease_until REAL, posted_at REAL,
    doubted_at REAL, updated_at REAL, announced INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run, idx)
);
"""
# Each guard as a clause over one bound value (the journal's ``guard_value``).
_GUARDS: Final[Mapping[Guard, str]] = {
    Guard.NONE: "",
    Guard.HOLDER: " AND owner = ?",
    Guard.LEASE_EXPIRED: " AND lease_until <= ?",
    Guard.NOT_ANNOUNCED: " AND announced = 0",
}
_BOUND: Final = frozenset({Guard.HOLDER, Guard.LEASE_EXPIRED})
_COLUMNS: Final = ("run", "idx", "urls", *FIELDS)


class SqliteJournal(Journal):
    """A journal in the SQLite file at ``path`` (created with its folder when missing)."""

    def __init__(self, path: str | Path, *, lease_s: float = DEFAULT_LEASE_S) -> None:
        super().__init__(lease_s=lease_s)
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit: every statement is its own transaction unless BEGIN says otherwise.
        self._db = sqlite3.connect(
            str(path), timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.Lock()  # one connection, shared by the engine's threads
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    def _insert_run(self, run: Run, entries: Sequence[Entry]) -> bool:
        row = (run.name, run.mode.value, run.fingerprint, json.dumps(run.options, default=str))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*row, run.entries, run.urls, run.created_at),
                )
                if cursor.rowcount == 1:
                    self._db.executemany(
                        "INSERT INTO entries (run, idx, urls, state, updated_at) "
                        "VALUES (?, ?, ?, ?, ?)",
                        [
                            (e.run, e.index, json.dumps(e.urls), e.state.value, e.updated_at)
                            for e in entries
                        ],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return cursor.rowcount == 1

    def run(self, name: str) -> Run | None:
        with self._lock:
            row = self._db.execute(
                "SELECT name, mode, fingerprint, options, entries, urls, created_at "
                "FROM runs WHERE name = ?",
                (name,),
            ).fetchone()
        if row is None:
            return None
        return Run(row[0], RunMode(row[1]), row[2], json.loads(row[3]), row[4], row[5], row[6])

    def runs(self) -> list[Run]:
        """Every run of the file, oldest first (``runs list``)."""
        with self._lock:
            rows = self._db.execute("SELECT name FROM runs ORDER BY created_at, name").fetchall()
        return [run for (name,) in rows if (run := self.run(name)) is not None]

    def entries(self, name: str, states: Collection[EntryState] = ()) -> list[Entry]:
        sql = f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE run = ?"  # noqa: S608 - constants
        params: list[Any] = [name]
        if states:
            sql += f" AND state IN ({', '.join('?' * len(states))})"
            params += [EntryState(s).value for s in states]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY idx", params).fetchall()
        return [_entry(row) for row in rows]

    def entry(self, name: str, index: int) -> Entry | None:
        sql = f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE run = ? AND idx = ?"  # noqa: S608
        with self._lock:
            row = self._db.execute(sql, (name, index)).fetchone()
        return None if row is None else _entry(row)

    def holder(self, kind: str, job_id: str) -> str | None:
        sql = "SELECT r.name, r.mode FROM entries e JOIN runs r ON r.name = e.run WHERE job_id = ?"
        with self._lock:
            rows = self._db.execute(sql, (job_id,)).fetchall()
        return next((name for name, mode in rows if RunMode(mode).kind == kind), None)

    def _write(
        self, run: str, index: int, move: Move, guard_value: Any, values: Mapping[str, Any]
    ) -> Entry | None:
        names = [name for name in values if name in FIELDS]  # only known columns reach SQL
        sets = ", ".join(f"{name} = ?" for name in names)
        sources = ", ".join("?" * len(move.sources))
        sql = (
            f"UPDATE entries SET {sets} WHERE run = ? AND idx = ? "  # noqa: S608 - constants
            f"AND state IN ({sources}){_GUARDS[move.guard]} RETURNING {', '.join(_COLUMNS)}"
        )
        params: list[Any] = [_stored(values[name]) for name in names]
        params += [run, index, *(state.value for state in move.sources)]
        if move.guard in _BOUND:
            params.append(guard_value)
        with self._lock:
            # RETURNING: the entry as this write left it, not as a later one did.
            row = self._db.execute(sql, params).fetchone()
        return None if row is None else _entry(row)


def _stored(value: Any) -> Any:
    if isinstance(value, EntryState):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value


def _entry(row: Sequence[Any]) -> Entry:
    values = dict(zip(_COLUMNS, row, strict=True))
    return Entry(
        run=values["run"],
        index=values["idx"],
        urls=tuple(json.loads(values["urls"])),
        state=EntryState(values["state"]),
        job_id=values["job_id"],
        reason=values["reason"],
        owner=values["owner"],
        lease_until=values["lease_until"],
        posted_at=values["posted_at"],
        doubted_at=values["doubted_at"],
        updated_at=values["updated_at"],
        announced=bool(values["announced"]),
    )


__all__: Sequence[str] = ("SqliteJournal",)
