"""``audit --run``: the jobs that carry on a run's failed work, so each URL is judged by the
final job of its chain, as the window audit judges it (a failed job with a later job of its
URL is ``resubmitted``; the later job is judged on its own).

Where to look, never what became of it: the API's job list for the URL since the failed job's
creation (an extract job resubmitted, a batch item or crawl page retried as an extract job:
one list page per failed URL); and, for a successor the API lists late (minutes, sometimes
more), the pipeline's own links, each job they name read by its own GET: the ledger's
(``scrape_pipeline.ledger.chains``: a row's ``resubmitted_as``, an open batch's ``retrying_items``)
and a closed batch's or crawl's manifest (an item's ``retry_job``, one GET per container with
a failed item). Followed until no new job failed, at most ``MAX_CHAIN`` links.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWS_ERRORS
from scrape_pipeline.geonode.client import JOBS_PAGE_MAX
from scrape_pipeline.geonode.models import ApiStatus
from scrape_pipeline.jobs import JobKey, JobKind
from scrape_pipeline.ledger.chains import MAX_CHAIN, RowReader, successor
from scrape_pipeline.processor.manifest import manifest_key, retrying_by_index
from scrape_pipeline_ops.audit.subjects import Calls, extract_subject, one_extract
from scrape_pipeline_ops.audit.verdicts import Subject

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

    from scrape_pipeline.geonode.client import GeonodeClient

type Container = tuple[JobKind, str]


def successors(ledger: RowReader, job_ids: Iterable[str]) -> dict[str, str]:
    """Each extract job of ``job_ids`` that the ledger says was resubmitted: its successor."""
    rows = ledger.get_many(JobKey(JobKind.EXTRACT, job_id) for job_id in job_ids)
    return {key.job_id: following for key, row in rows.items() if (following := successor(row))}


@dataclass
class Links:
    """The pipeline's records of where a chain goes on: the ledger (with a stack) and the
    manifests in the bucket; ``manifest_reads`` counts the GETs of those."""

    ledger: RowReader | None = None
    s3: S3Client | None = None
    bucket: str = ""
    manifest_reads: int = 0

    def named(self, failed: list[Subject]) -> list[str]:
        """The successors these records name: a resubmitted extract job's, a retried item's."""
        named: list[str] = []
        if self.ledger is not None:
            extracts = [s.job_id for s in failed if s.kind is JobKind.EXTRACT]
            named += successors(self.ledger, extracts).values()
        items = [s for s in failed if s.kind is not JobKind.EXTRACT and s.item is not None]
        retries = self._retries({(s.kind, s.job_id) for s in items})
        named += (retries[(s.kind, s.job_id)].get(s.item or 0, "") for s in items)
        return [job_id for job_id in named if job_id]

    def _retries(self, containers: set[Container]) -> dict[Container, dict[int, str]]:
        """Each container's retried items, by index: its open row's, else its manifest's."""
        rows = {}
        if self.ledger is not None:
            rows = self.ledger.get_many(JobKey(kind, job_id) for kind, job_id in containers)
        found: dict[Container, dict[int, str]] = {}
        for kind, job_id in containers:
            row = rows.get(JobKey(kind, job_id))
            open_ones = retrying_by_index(row.retrying_items) if row is not None else {}
            found[(kind, job_id)] = open_ones or self._manifest_retries(kind, job_id)
        return found

    def _manifest_retries(self, kind: JobKind, job_id: str) -> dict[int, str]:
        """The retry job of each item the container's manifest names one for (none: no
        manifest yet, or none readable)."""
        if self.s3 is None:
            return {}
        self.manifest_reads += 1
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=manifest_key(kind, job_id))
            manifest: Any = json.loads(body["Body"].read())
            lines = manifest["items"]
            return {int(x["index"]): str(x["retry_job"]) for x in lines if x.get("retry_job")}
        except (*AWS_ERRORS, ValueError, KeyError, TypeError):
            return {}


def carried_on(
    client: GeonodeClient,
    subjects: Iterable[Subject],
    calls: Calls,
    links: Links,
) -> list[Subject]:
    """The extract jobs that carry on the failed ``subjects``' work, and theirs, each once."""
    known = {s.job_id for s in subjects if s.kind is JobKind.EXTRACT}
    listed: set[str] = set()  # URLs whose newer jobs the API was asked for
    found: list[Subject] = []
    failed = [s for s in subjects if s.status == ApiStatus.FAILED]
    for _ in range(MAX_CHAIN):
        if not failed:
            break
        new: list[Subject] = []
        for subject in failed:
            if subject.url and subject.created_at is not None and subject.url not in listed:
                listed.add(subject.url)
                new += _unseen(_newer(client, subject, calls), known)
        named = links.named(failed)
        new += _unseen((one_extract(client, i, calls) for i in named if i not in known), known)
        found += new
        failed = [s for s in new if s.status == ApiStatus.FAILED]
    return found


def _unseen(candidates: Iterable[Subject], known: set[str]) -> list[Subject]:
    """The candidates not known yet, each once; ``known`` then holds them too."""
    fresh = []
    for candidate in candidates:
        if candidate.job_id not in known:
            known.add(candidate.job_id)
            fresh.append(candidate)
    return fresh


def _newer(client: GeonodeClient, subject: Subject, calls: Calls) -> Iterator[Subject]:
    """The extract jobs of the subject's URL the API created after it, newest first."""
    assert subject.url is not None and subject.created_at is not None
    page = 1
    while True:
        answer = client.list_jobs(
            url=subject.url, start_date=subject.created_at, page=page, page_size=JOBS_PAGE_MAX
        )
        calls.list_pages += 1
        for row in answer.items:
            newer = extract_subject(row)
            if newer.created_at is not None and newer.created_at > subject.created_at:
                yield newer
        if answer.is_last or not answer.items:
            return
        page += 1
