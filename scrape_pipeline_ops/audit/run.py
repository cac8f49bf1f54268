"""One audit: the window's subjects from the API, their objects from one listing of the
bucket's prefixes, a verdict each, and the reason of each dead letter (one GET per record)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrape_pipeline.aws_errors import AWS_ERRORS
from scrape_pipeline.ledger.chains import RowReader
from scrape_pipeline.processor.results import dead_letter_key
from scrape_pipeline_ops.audit.chains import Links, carried_on
from scrape_pipeline_ops.audit.known import Known
from scrape_pipeline_ops.audit.objects import Listing, kind_prefixes, list_histories
from scrape_pipeline_ops.audit.report import AuditReport
from scrape_pipeline_ops.audit.subjects import (
    Calls,
    container_items,
    one_extract,
    replaced_failures,
    window_extracts,
)
from scrape_pipeline_ops.audit.verdicts import Finding, Subject, Verdict, judge

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

    from scrape_pipeline.geonode.client import GeonodeClient

DEFAULT_GRACE_S = 300.0


@dataclass(frozen=True)
class Window:
    """Jobs created in ``[since, until]``; settled less than ``grace_s`` before ``now``:
    settling, not missing."""

    since: float
    until: float
    now: float
    grace_s: float = DEFAULT_GRACE_S


def subjects_of(
    client: GeonodeClient,
    window: Window,
    known: Known,
    calls: Calls,
    links: Links | None = None,
) -> list[Subject]:
    """The window's extracts (or only a run's) and the items of the batches and crawls known.

    An extract the job list does not show (a run's, or one the ledger noted that the API lists
    late) is read by its own GET, and judged if the API created it in the window. A run's
    failed jobs and items are followed to the jobs that carry their work on (``chains``)."""
    subjects: list[Subject] = []
    if known.extracts is None or known.extracts:
        subjects = window_extracts(client, window.since, window.until, calls)
    wanted = known.noted if known.extracts is None else known.extracts
    listed = {s.job_id: s for s in subjects if known.extracts is None or s.job_id in wanted}
    for job_id in wanted:
        if job_id not in listed:
            found = one_extract(client, job_id, calls)
            created = found.created_at
            if created is None or window.since <= created <= window.until:
                listed[job_id] = found
    subjects = list(listed.values())
    for kind, job_id in known.containers:
        subjects += container_items(client, kind, job_id, (window.since, window.until), calls)
    if known.for_run:
        subjects += carried_on(client, subjects, calls, links or Links())
    return subjects


def audit(
    client: GeonodeClient,
    s3: S3Client,
    bucket: str,
    window: Window,
    known: Known,
    *,
    run: str | None = None,
    ledger: RowReader | None = None,
) -> AuditReport:
    """Judge every job of the window (or of ``run``) from the API and the bucket; ``ledger``
    only names where a run's chains go on."""
    report = AuditReport(window.since, window.until, bucket, run=run)
    links = Links(ledger, s3, bucket)
    subjects = subjects_of(client, window, known, report.api, links)
    report.s3_manifest_reads = links.manifest_reads
    jobs = {(s.kind, s.job_id) for s in subjects}
    kinds = sorted({s.kind for s in subjects})
    listing = list_histories(
        s3, bucket, kind_prefixes(kinds), wanted=lambda w: (w[0], w[1]) in jobs
    )
    report.s3_list_calls, report.s3_entries_listed = listing.calls, listing.entries
    replaced = replaced_failures(subjects)
    for subject in subjects:
        finding = _judged(subject, listing, window, subject.where in replaced)
        if finding.verdict is Verdict.DEAD_LETTERED:
            report.s3_dead_letter_reads += 1
            finding = Finding(subject, finding.verdict, reason=_reason(s3, bucket, subject))
        report.findings.append(finding)
    return report


def _judged(subject: Subject, listing: Listing, window: Window, replaced: bool) -> Finding:
    return judge(
        subject,
        listing.files(subject.where),
        listing.dead_letter(subject.where),
        now=window.now,
        grace_s=window.grace_s,
        replaced=replaced,
    )


def _reason(s3: S3Client, bucket: str, subject: Subject) -> str:
    """The dead-letter record's ``reason`` (an item's: its error ``code``)."""
    key = dead_letter_key(subject.kind, subject.job_id, subject.item)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        record = json.loads(body)
    except (*AWS_ERRORS, ValueError):
        return "unreadable record"
    if not isinstance(record, dict):
        return "unreadable record"
    for name in ("reason", "code", "message"):
        if record.get(name):
            return str(record[name])
    return "unstated"
