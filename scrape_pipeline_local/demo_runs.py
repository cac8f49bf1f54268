"""The demo's submission runs: part of its workload posted by the submitter function.

A chaos profile's ``runs_share`` of the extract URLs becomes an async run and the same share
of the batch URLs a batch run. Each is uploaded as a user uploads one (its options, then
``submissions/<run>.txt``), so the stack's S3 notification, submissions queue and submitter
function post it through the runs journal, and its jobs carry the run on their rows and events.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from scrape_pipeline.runs.plan import RunMode
from scrape_pipeline.runs.request import options_key, urls_key

ASYNC_RUN: Final = "demo-extracts"
BATCH_RUN: Final = "demo-batches"


@dataclass(frozen=True)
class DemoRun:
    """One run of the demo: its name, how it posts, its URLs."""

    name: str
    mode: RunMode
    urls: tuple[str, ...]
    batch_size: int | None = None  # URLs per batch, for a batch run

    @property
    def units(self) -> str:
        """How the report counts its URLs (as the demo counts its direct submissions)."""
        return "extract jobs" if self.mode is RunMode.ASYNC else "batch items"

    def upload(self, s3: Any, bucket: str) -> None:
        """Its options first, then its URL list: the list's upload starts the run."""
        options: dict[str, Any] = {"mode": self.mode.value}
        if self.batch_size is not None:
            options["batch_size"] = self.batch_size
        s3.put_object(Bucket=bucket, Key=options_key(self.name), Body=json.dumps(options))
        body = "".join(f"{url}\n" for url in self.urls)
        s3.put_object(Bucket=bucket, Key=urls_key(self.name), Body=body.encode())


@dataclass(frozen=True)
class Split:
    """The workload's URLs: those posted straight to the API, and the runs."""

    extracts: list[str]
    batch_urls: list[str]
    runs: list[DemoRun]


def split(
    extracts: Sequence[str], batch_urls: Sequence[str], share: float, batch_size: int
) -> Split:
    """``share`` of each list (its last URLs) goes into a run of its own; an empty one none."""
    in_async = round(len(extracts) * share)
    in_batch = round(len(batch_urls) * share)
    direct_extracts = list(extracts[: len(extracts) - in_async])
    direct_batch = list(batch_urls[: len(batch_urls) - in_batch])
    runs = []
    if in_async:
        runs.append(DemoRun(ASYNC_RUN, RunMode.ASYNC, tuple(extracts[len(direct_extracts) :])))
    if in_batch:
        urls = tuple(batch_urls[len(direct_batch) :])
        runs.append(DemoRun(BATCH_RUN, RunMode.BATCH, urls, batch_size))
    return Split(direct_extracts, direct_batch, runs)
