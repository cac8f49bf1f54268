"""Where ``poll`` writes what settled: a folder (``LocalTarget``) or the pipeline's own S3
keys (``S3Target``, through ``ResultStore``: a job the pipeline stored already is not written
again)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from scrape_pipeline.geonode.models import ApiStatus, Job
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import CONTENT_FILES, metadata_of, result_prefix
from scrape_pipeline_ops.cli.config import UsageError

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

    from scrape_pipeline.geonode.models import BatchItem
    from scrape_pipeline_ops.cli.config import Context


class Target(Protocol):
    """Where settled jobs are written."""

    def write(self, job: Job) -> str:
        """Write the job (once); returns where it is."""
        ...

    def write_item(self, kind: JobKind, job_id: str, index: int, item: BatchItem) -> str:
        """Write one item of a batch or crawl (once); returns where it is."""
        ...

    def where(self, kind: JobKind, job_id: str) -> str:
        """Where a batch's or crawl's items are written."""
        ...


def job_metadata(job: Job) -> dict[str, Any]:
    """What ``metadata.json`` holds: the whole answer but its content (as the processor)."""
    return {k: v for k, v in job.raw.items() if k != "data"}


def _atomic_write(path: Path, body: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class LocalTarget:
    """``<root>/<name>/<content files>``, ``metadata.json`` last: its presence means complete."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def write_files(self, name: str, data: Mapping[str, Any], metadata: Mapping[str, Any]) -> str:
        """Write one result unless its ``metadata.json`` is there already; returns the folder."""
        folder = self.root / name
        if (folder / "metadata.json").exists():
            return str(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for fmt, (filename, _) in CONTENT_FILES.items():
            value = data.get(fmt)
            if value is None:
                continue
            body = value if isinstance(value, str) else json.dumps(value, indent=2)
            _atomic_write(folder / filename, body.encode())
        meta = json.dumps(metadata, indent=2, sort_keys=True, default=str)
        _atomic_write(folder / "metadata.json", meta.encode())
        return str(folder)

    def write(self, job: Job) -> str:
        return self.write_files(job.job_id, job.data, job_metadata(job))

    def write_item(self, kind: JobKind, job_id: str, index: int, item: BatchItem) -> str:
        del kind  # a job id is the API's: one folder per job whatever its kind, as for extracts
        return self.write_files(f"{job_id}/{index:05d}", item.data, metadata_of(item.raw))

    def where(self, kind: JobKind, job_id: str) -> str:
        del kind
        return str(self.root / job_id)


class _PrefixedS3:
    """An S3 client whose ``put_object`` keys live under a prefix (the rest is untouched)."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    def put_object(self, **kwargs: Any) -> Any:
        kwargs["Key"] = f"{self._prefix}/{kwargs['Key']}"
        return self._client.put_object(**kwargs)


class S3Target:
    """The pipeline's ``ResultStore``: results/extract/<id>/..., dead-letters/extract/<id>.json."""

    def __init__(self, url: str, client: Any) -> None:
        from scrape_pipeline.processor.results import ResultStore  # noqa: PLC0415

        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise UsageError(f"no bucket in {url!r}")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        s3 = _PrefixedS3(client, self.prefix) if self.prefix else client
        self._store = ResultStore(bucket, client=cast("S3Client", s3))

    def write(self, job: Job) -> str:
        base = self._base
        if job.status == ApiStatus.COMPLETED:
            self._store.store(JobKind.EXTRACT, job.job_id, job.data, job_metadata(job))
            return base + result_prefix(JobKind.EXTRACT, job.job_id)
        record = {"job_id": job.job_id, "status": job.status, **job_metadata(job)}
        return base + self._store.dead_letter(JobKind.EXTRACT, job.job_id, record)

    def write_item(self, kind: JobKind, job_id: str, index: int, item: BatchItem) -> str:
        # As the pipeline's PagedStore: completed stored, the others dead-lettered.
        if item.status == ApiStatus.COMPLETED:
            self._store.store(kind, job_id, item.data, metadata_of(item.raw), item=index)
            return self._base + result_prefix(kind, job_id, index)
        record = {
            "url": item.url,
            "status": item.status,
            "code": item.error_code,
            "message": item.error_message,
        }
        return self._base + self._store.dead_letter(kind, job_id, record, item=index)

    def where(self, kind: JobKind, job_id: str) -> str:
        return self._base + result_prefix(kind, job_id)

    @property
    def _base(self) -> str:
        return f"s3://{self.bucket}/" + (f"{self.prefix}/" if self.prefix else "")


def open_target(out: str | None, ctx: Context) -> Target | None:
    """The target ``--out`` names, or None."""
    if not out:
        return None
    if out.startswith("s3://"):
        return S3Target(out, ctx.aws("s3"))
    return LocalTarget(out)
