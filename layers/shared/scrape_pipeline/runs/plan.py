"""What a run is before anything is posted; its fingerprint (URLs, mode, options) makes the same
file submitted the same way the same run, found again by a rerun."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import batched
from typing import Any, Final

from scrape_pipeline.errors import PipelineError

BATCH_MAX_URLS: Final = 1000
FORMATS: Final = ("markdown", "html", "links")  # what a POST's ``formats`` may name
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_URL = re.compile(r"https?://\S+$")


class RunMode(StrEnum):
    """How a run's URLs are posted: one extract job each, batches, or one crawl each."""

    ASYNC = "async"
    BATCH = "batch"
    CRAWL = "crawl"

    @property
    def kind(self) -> str:
        """The job kind one entry's POST creates (the ledger's ``JobKind`` value)."""
        return "extract" if self is RunMode.ASYNC else self.value


class BadPlanError(PipelineError, ValueError):
    """A run that cannot be planned: a bad name, no URL, a batch size out of range."""


@dataclass(frozen=True)
class RunSpec:
    """A run to plan: its URLs, mode, the options every POST sends, and the batch size."""

    urls: tuple[str, ...]
    mode: RunMode
    options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = BATCH_MAX_URLS

    def __post_init__(self) -> None:
        if not self.urls:
            raise BadPlanError("a run needs at least one URL")
        if not 1 <= self.batch_size <= BATCH_MAX_URLS:
            raise BadPlanError(f"the batch size must be within 1..{BATCH_MAX_URLS}")

    @classmethod
    def of(
        cls,
        urls: Iterable[str],
        mode: RunMode,
        options: Mapping[str, Any] | None = None,
        batch_size: int = BATCH_MAX_URLS,
    ) -> RunSpec:
        """A spec with each URL once, in first-seen order: a URL listed twice is posted once."""
        return cls(tuple(dict.fromkeys(urls)), mode, dict(options or {}), batch_size)

    def fingerprint(self) -> str:
        """A digest of everything that decides what the run posts."""
        size = self.batch_size if self.mode is RunMode.BATCH else None
        head = json.dumps(
            {"mode": self.mode.value, "options": self.options, "batch_size": size},
            sort_keys=True,
            default=str,
        )
        digest = hashlib.sha256(head.encode())
        for url in self.urls:
            digest.update(b"\n" + url.encode())
        return digest.hexdigest()

    def derived_name(self) -> str:
        """The run's name when none is given: its mode and the start of its fingerprint."""
        return f"{self.mode.value}-{self.fingerprint()[:16]}"

    def chunks(self) -> list[tuple[str, ...]]:
        """The URLs of each entry: one each, or batches of at most ``batch_size`` (file order)."""
        return list(batched(self.urls, self.batch_size if self.mode is RunMode.BATCH else 1))


def is_url(text: str) -> bool:
    """``text`` is one http(s) URL (a line of a URL list)."""
    return _URL.match(text) is not None


def post_options(
    formats: Sequence[str], render_js: bool, max_pages: int | None = None
) -> dict[str, Any]:
    """The options every POST of a run sends, built one way for the CLI and the function."""
    options: dict[str, Any] = {"formats": list(dict.fromkeys(formats)), "render_js": render_js}
    if max_pages is not None:
        options["max_pages"] = max_pages
    return options


def check_name(name: str) -> str:
    """``name`` if it can name a run (letters, digits, ``.``, ``_``, ``-``), else BadPlanError."""
    if not _NAME.match(name):
        raise BadPlanError(f"a run name is 1-128 of A-Z a-z 0-9 . _ - (got {name[:40]!r})")
    return name


@dataclass(frozen=True)
class Run:
    """A planned run as a journal stores it."""

    name: str
    mode: RunMode
    fingerprint: str
    options: Mapping[str, Any]
    entries: int
    urls: int
    created_at: float

    @classmethod
    def planned(cls, name: str, spec: RunSpec, now: float) -> Run:
        """The record of ``spec`` planned as ``name`` at ``now``."""
        return cls(
            name=check_name(name),
            mode=spec.mode,
            fingerprint=spec.fingerprint(),
            options=dict(spec.options),
            entries=len(spec.chunks()),
            urls=len(spec.urls),
            created_at=now,
        )
