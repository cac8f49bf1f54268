"""Large results, judged from outside: stored byte for byte, and which way each one came.

A page is "large" when the receiver's old 256 KiB limit would have refused its delivery. Each
stored large result is read back from S3 and compared with the page the simulator served (its
URL at its drawn size). An extract job's way in is read from the sender's record: a 2xx
attempt means the webhook delivered it; attempts but none 2xx (a 413, an outage, a rotation)
mean the reconciler replayed it from the delivery log; no attempt at all (a dropped event)
means the reconciler found it in the job list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from scrape_pipeline.processor.results import CONTENT_FILES
from scrape_pipeline_local.simulator import content

LARGE_RESULT_BYTES = 262_144  # the receiver's limit before large deliveries were carried
WEBHOOK, DELIVERY_LOG, JOB_LIST = "webhook", "delivery log", "job list"


@dataclass
class LargeResults:
    """What the run did with large pages."""

    stored: int = 0
    exact: int = 0
    largest_bytes: int = 0
    paths: Counter[str] = field(default_factory=Counter)  # extract jobs only: by way in
    refused: int = 0  # extract jobs whose delivery was answered 413 (over the limit)
    mismatched: list[str] = field(default_factory=list)

    def line(self) -> tuple[str, str]:
        """The report's row."""
        ways = ", ".join(f"{self.paths[p]} {p}" for p in (WEBHOOK, DELIVERY_LOG, JOB_LIST))
        return (
            "large results (> 256 KiB) stored exact",
            f"{self.exact}/{self.stored}, largest {self.largest_bytes / 1e6:.1f} MB; "
            f"extract jobs by {ways}; {self.refused} refused 413",
        )


def _statuses(job_id: str, attempts: Iterable[Mapping[str, Any]]) -> list[int | None]:
    return [
        a["http_status"]
        for a in attempts
        if a["event_type"] == "extract_completed" and a["job_id"] == job_id
    ]


def way_in(statuses: Sequence[int | None]) -> str:
    """How an extract job's result reached the pipeline, from its attempts' answers."""
    if any(s is not None and 200 <= int(s) < 300 for s in statuses):
        return WEBHOOK
    return DELIVERY_LOG if statuses else JOB_LIST


def measure(
    s3: Any,
    bucket: str,
    stored: Iterable[tuple[str, Mapping[str, Any]]],
    attempts: Sequence[Mapping[str, Any]],
) -> LargeResults:
    """Read back every large stored result; ``stored`` is (S3 result prefix, truth row)."""
    found = LargeResults()
    for prefix, job in stored:
        size = int(job["content_bytes"])
        if size <= LARGE_RESULT_BYTES:
            continue
        found.stored += 1
        found.largest_bytes = max(found.largest_bytes, size)
        served = content.extract(job["url"], tuple(job["formats"]), size)
        if all(
            _read(s3, bucket, f"{prefix}/{CONTENT_FILES[name][0]}") == str(served[name]).encode()
            for name in ("markdown", "html")
            if name in served
        ):
            found.exact += 1
        else:
            found.mismatched.append(prefix)
        if job["kind"] == "extract":
            statuses = _statuses(job["job_id"], attempts)
            found.paths[way_in(statuses)] += 1
            found.refused += HTTPStatus.REQUEST_ENTITY_TOO_LARGE in statuses
    return found


def _read(s3: Any, bucket: str, key: str) -> bytes:
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
