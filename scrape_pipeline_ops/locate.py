"""Where a job's result is in the bucket, found by its id or by the URL it scraped.

by id     results/<kind>/<job id>/ listed (ListObjectVersions), extract first, then batch
          and crawl; a job with no result but a dead-letter record is named as such
by URL    the runs journal's entries name the job (a batch's item is the URL's place in
          its entry), else the API's job list by ``url``, newest first; a candidate is
          taken only if its stored ``metadata.json`` names the same URL
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import DEAD_LETTER_PREFIX, result_prefix
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import RunMode
from scrape_pipeline_ops.audit.known import RunJournal
from scrape_pipeline_ops.audit.objects import list_histories
from scrape_pipeline_ops.audit.verdicts import METADATA

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

    from scrape_pipeline.geonode.client import GeonodeClient


@dataclass(frozen=True)
class Located:
    """One stored result (a job's, or a batch or crawl item's): its keys and their sizes."""

    bucket: str
    kind: JobKind
    job_id: str
    item: int | None
    prefix: str
    keys: tuple[tuple[str, int], ...]  # (key, size), metadata.json among them

    @property
    def size(self) -> int:
        """Bytes of every object together."""
        return sum(size for _, size in self.keys)

    def record(self) -> dict[str, Any]:
        """What ``results get`` prints of it."""
        return {
            "job_id": self.job_id,
            "kind": self.kind.value,
            "item": self.item,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "keys": [key for key, _ in self.keys],
            "size": self.size,
        }


@dataclass(frozen=True)
class Candidate:
    """A job (or item) a URL may have become; ``item`` None for a crawl: any of its pages."""

    kind: JobKind
    job_id: str
    item: int | None = None
    any_item: bool = False


def stored(
    s3: S3Client, bucket: str, kind: JobKind, job_id: str, item: int | None = None
) -> list[Located]:
    """The job's stored results (one per item for a batch or crawl), complete ones only."""
    base = result_prefix(kind, job_id, item)
    listing = list_histories(s3, bucket, [f"{base}/"], wanted=lambda w: w[1] == job_id)
    found = []
    for (found_kind, _, found_item), files in sorted(
        listing.objects.items(), key=lambda pair: -1 if pair[0][2] is None else pair[0][2]
    ):
        live = {name: h for name, h in files.items() if h.live}
        if METADATA not in live or found_kind is not kind:
            continue  # not whole (metadata.json is written last), or a batch's manifest
        prefix = result_prefix(kind, job_id, found_item)
        keys = tuple((f"{prefix}/{name}", h.size) for name, h in sorted(live.items()))
        found.append(Located(bucket, kind, job_id, found_item, prefix, keys))
    return found


def by_id(s3: S3Client, bucket: str, job_id: str) -> list[Located]:
    """The job's results, whatever its kind (extract looked at first)."""
    for kind in JobKind:
        found = stored(s3, bucket, kind, job_id)
        if found:
            return found
    return []


def dead_letters(s3: S3Client, bucket: str, job_id: str) -> list[str]:
    """The live dead-letter keys of a job of any kind (the job's own, or its items')."""
    keys = []
    for kind in JobKind:
        prefix = f"{DEAD_LETTER_PREFIX}/{kind.value}/{job_id}"
        listing = list_histories(s3, bucket, [prefix], wanted=lambda w: w[1] == job_id)
        for (_, _, item), history in sorted(
            listing.dead_letters.items(), key=lambda pair: pair[0][2] or -1
        ):
            if history.live:
                suffix = ".json" if item is None else f"/{item:05d}.json"
                keys.append(f"{prefix}{suffix}")
    return keys


def journal_candidates(journal: RunJournal, url: str) -> list[Candidate]:
    """The jobs the runs journal says ``url`` was submitted as, latest POST first."""
    found: list[tuple[float, Candidate]] = []
    for run in journal.runs():
        for entry in journal.entries(run.name, (EntryState.SUBMITTED,)):
            if not entry.job_id or url not in entry.urls:
                continue
            kind = JobKind(run.mode.kind)
            if run.mode is RunMode.BATCH:
                candidate = Candidate(kind, entry.job_id, item=entry.urls.index(url))
            elif run.mode is RunMode.CRAWL:
                candidate = Candidate(kind, entry.job_id, any_item=True)
            else:
                candidate = Candidate(kind, entry.job_id)
            found.append((entry.posted_at or 0.0, candidate))
    return [c for _, c in sorted(found, key=lambda pair: -pair[0])]


def api_candidates(client: GeonodeClient, url: str) -> Iterator[Candidate]:
    """The extract jobs of ``url`` in the API's job list, newest first."""
    for job in client.iter_jobs(url=url):
        yield Candidate(JobKind.EXTRACT, job.job_id)


def metadata_url(raw: Any) -> str | None:
    """The URL a stored ``metadata.json`` names: a job's ``metadata.url``, an item's ``url``."""
    if not isinstance(raw, dict):
        return None
    inner = raw.get("metadata")
    if isinstance(inner, dict) and isinstance(inner.get("url"), str):
        return str(inner["url"])
    return str(raw["url"]) if isinstance(raw.get("url"), str) else None


def _names(s3: S3Client, located: Located, url: str) -> bool:
    key = f"{located.prefix}/{METADATA}"
    body = s3.get_object(Bucket=located.bucket, Key=key)["Body"].read()
    try:
        return metadata_url(json.loads(body)) == url
    except ValueError:
        return False


def by_url(s3: S3Client, bucket: str, url: str, candidates: Iterable[Candidate]) -> list[Located]:
    """The first candidate's result whose ``metadata.json`` names ``url``."""
    for candidate in candidates:
        item = None if candidate.any_item else candidate.item
        for located in stored(s3, bucket, candidate.kind, candidate.job_id, item):
            if _names(s3, located, url):
                return [located]
    return []


def write(s3: S3Client, located: Located, out: Path) -> list[Path]:
    """Each object of ``located`` under ``out`` (an item's in its index's folder), as stored."""
    base = result_prefix(located.kind, located.job_id)
    written = []
    for key, _ in located.keys:
        target = out / key.removeprefix(f"{base}/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3.get_object(Bucket=located.bucket, Key=key)["Body"].read())
        written.append(target)
    return written
