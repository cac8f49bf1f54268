"""Results in S3 under deterministic keys (docs/architecture.md), each written at most once
(``If-None-Match: *``); ``metadata.json`` goes last: its presence means the result is whole."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import (
    AWS_ERRORS,
    is_no_such_key,
    is_precondition_failed,
    is_write_conflict,
    unavailable,
)
from scrape_pipeline.jobs import JobKind

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

RESULTS_PREFIX = "results"
DEAD_LETTER_PREFIX = "dead-letters"
# format name in the job's data -> (file name, content type)
CONTENT_FILES: Mapping[str, tuple[str, str]] = {
    "markdown": ("content.md", "text/markdown; charset=utf-8"),
    "html": ("content.html", "text/html; charset=utf-8"),
    "links": ("links.json", "application/json"),
}
# How often a put meeting another conditional write to the same key (409) is made at all.
CONFLICT_TRIES = 3


def result_prefix(kind: JobKind, job_id: str, item: int | None = None) -> str:
    """Where a job's (or a batch item's) result lives."""
    base = f"{RESULTS_PREFIX}/{kind.value}/{job_id}"
    return base if item is None else f"{base}/{item:05d}"


def dead_letter_key(kind: JobKind, job_id: str, item: int | None = None) -> str:
    """Where a job's (or a batch item's) dead-letter record lives."""
    base = f"{DEAD_LETTER_PREFIX}/{kind.value}/{job_id}"
    return f"{base}.json" if item is None else f"{base}/{item:05d}.json"


class ResultStore:
    """Writes results and dead-letter records to the results bucket."""

    def __init__(self, bucket: str, *, client: S3Client | None = None) -> None:
        if client is None:
            import boto3  # noqa: PLC0415 - only when no client is injected

            client = boto3.client("s3")
        self.bucket = bucket
        self._s3 = client

    def store(
        self,
        kind: JobKind,
        job_id: str,
        data: Mapping[str, Any],
        metadata: Mapping[str, Any],
        *,
        item: int | None = None,
    ) -> list[str]:
        """Write each content format the job returned, then its metadata: every key, in order."""
        prefix = result_prefix(kind, job_id, item)
        keys: list[str] = []
        for name, (filename, content_type) in CONTENT_FILES.items():
            value = data.get(name)
            if value is not None:
                body = value.encode() if isinstance(value, str) else _json(value)
                keys.append(f"{prefix}/{filename}")
                self._put_once(keys[-1], body, content_type)
        keys.append(f"{prefix}/metadata.json")
        self._put_once(keys[-1], _json(metadata), "application/json")
        return sorted(keys)

    def dead_letter(
        self, kind: JobKind, job_id: str, record: Mapping[str, Any], *, item: int | None = None
    ) -> str:
        """Park a job that will not succeed, with why, for an operator to look at."""
        key = dead_letter_key(kind, job_id, item)
        self._put_once(key, _json(record), "application/json")
        return key

    def put_json_once(self, key: str, value: Any) -> bool:
        """Write ``value`` as JSON at ``key`` unless an object is there: True if this wrote it."""
        return self._put_once(key, _json(value), "application/json")

    def read_json(self, key: str, *, missing_ok: bool = False) -> Any:
        """The JSON object at ``key``; None if none is there and ``missing_ok``."""
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except AWS_ERRORS as exc:
            if missing_ok and is_no_such_key(exc):
                return None
            raise unavailable("s3", "GetObject", exc) from exc
        return json.loads(body)

    def retire(self, key: str) -> None:
        """Remove a dead-letter record a later outcome overturned (a noncurrent version stays)."""
        if not key.startswith(f"{DEAD_LETTER_PREFIX}/"):
            raise ValueError(f"only dead-letter records are retired, not {key!r}")
        try:
            self._s3.delete_object(Bucket=self.bucket, Key=key)
        except AWS_ERRORS as exc:
            raise unavailable("s3", "DeleteObject", exc) from exc

    def _put_once(self, key: str, body: bytes, content_type: str) -> bool:
        """Put unless an object is at ``key``: True if this call wrote it."""
        tries = 1
        while True:
            try:
                self._s3.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=body,
                    ContentType=content_type,
                    IfNoneMatch="*",
                )
            except AWS_ERRORS as exc:
                # 412: an object is already at the key, so this write repeats one that succeeded.
                if is_precondition_failed(exc):
                    return False
                # 409: another conditional write is in flight and may fail: tried again.
                if is_write_conflict(exc) and tries < CONFLICT_TRIES:
                    tries += 1
                    continue
                # Still conflicting, or S3 failing: the job is retried later, nothing is marked.
                raise unavailable("s3", "PutObject", exc) from exc
            return True


def metadata_of(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What ``metadata.json`` keeps of a job's or item's answer: all of it but its data."""
    return {k: v for k, v in raw.items() if k != "data"}


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
