"""Printing: JSON lines for machines (``--json``), tables and aligned text for people.

rich is the ``cli`` extra, not part of the Lambda layer: it is imported only when a
terminal will show its output, and when it is missing the same data comes out as plain text.
Streams are looked up at print time, so a redirected ``sys.stdout`` (or pytest's) is honoured.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TextIO

from scrape_pipeline.geonode.fields import format_time

Row = Mapping[str, Any]


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_json(data: Any) -> str:
    """One JSON document on one line."""
    return json.dumps(data, default=_default, ensure_ascii=False)


def cell(value: Any) -> str:
    """A value as a table cell: nested data as compact JSON, nothing as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Mapping | list):
        return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _rich_console(stream: TextIO) -> Any:
    """A rich Console writing to ``stream`` when it is a terminal and rich is installed."""
    if not _is_tty(stream):
        return None
    try:
        from rich.console import Console  # noqa: PLC0415 - the `cli` extra, terminals only
    except ImportError:
        return None
    return Console(file=stream, highlight=False)


def plain_table(rows: Sequence[Row], columns: Sequence[str]) -> list[str]:
    """Rows as left-aligned columns under an upper-case header, two spaces apart."""
    grid = [[c.upper() for c in columns]] + [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    return [
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in grid
    ]


class Printer:
    """Writes results to stdout and the one error line to stderr."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self._stdout = stdout
        self._stderr = stderr

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    def _write(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def record(self, data: Row, *, title: str | None = None) -> None:
        """One result: a JSON line, or ``key  value`` lines (a two-column table on a terminal)."""
        if self.json_mode:
            self._write(to_json(data))
            return
        console = _rich_console(self.stdout)
        if console is not None:
            from rich.table import Table  # noqa: PLC0415

            table = Table(title=title, show_header=False, box=None, pad_edge=False)
            table.add_column(style="bold")
            table.add_column()
            for key, value in data.items():
                table.add_row(key, cell(value))
            console.print(table)
            return
        if title:
            self._write(title)
        width = max((len(k) for k in data), default=0)
        for key, value in data.items():
            self._write(f"{key.ljust(width)}  {cell(value)}")

    def table(
        self, rows: Sequence[Row], columns: Sequence[str], *, title: str | None = None
    ) -> None:
        """Many results: one JSON line each (every field), or a table of ``columns``."""
        if self.json_mode:
            for row in rows:
                self._write(to_json(row))
            return
        console = _rich_console(self.stdout)
        if console is not None:
            from rich.table import Table  # noqa: PLC0415

            table = Table(title=title)
            for column in columns:
                table.add_column(column, overflow="fold")
            for row in rows:
                table.add_row(*(cell(row.get(c)) for c in columns))
            console.print(table)
            return
        if title:
            self._write(title)
        for line in plain_table(rows, columns):
            self._write(line)

    def row(self, data: Row, columns: Sequence[str]) -> None:
        """One result as it happens (submit, poll): a JSON line, or ``columns`` tab-separated."""
        if self.json_mode:
            self._write(to_json(data))
        else:
            self._write("\t".join(cell(data.get(c)) for c in columns))

    def note(self, text: str) -> None:
        """A line for people only (the JSON output stays pure data)."""
        if not self.json_mode:
            self._write(text)

    def notice(self, text: str) -> None:
        """A line on stderr for the person running the command (stdout stays the results)."""
        self.stderr.write(f"scrape-pipeline: {text}\n")
        self.stderr.flush()

    def error(self, message: str) -> None:
        """The one error line."""
        line = " ".join(message.split())
        self.stderr.write(f"scrape-pipeline: error: {line}\n")
        self.stderr.flush()

    @contextmanager
    def progress(self, total: int, label: str) -> Iterator[Callable[[], None]]:
        """A progress bar on stderr when it is a terminal; yields ``advance()``."""
        console = _rich_console(self.stderr) if total > 0 else None
        if console is None:
            yield lambda: None
            return
        from rich.progress import Progress  # noqa: PLC0415

        with Progress(console=console, transient=False) as bar:
            task = bar.add_task(label, total=total)
            yield lambda: bar.advance(task)
