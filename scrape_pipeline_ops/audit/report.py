"""An audit's findings counted by verdict, dead letters by reason, and what it cost."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline_ops.audit.subjects import Calls
from scrape_pipeline_ops.audit.verdicts import FAILING, Finding, Verdict


@dataclass
class AuditReport:
    """What an audit of one window found."""

    since: float
    until: float
    bucket: str
    run: str | None = None
    findings: list[Finding] = field(default_factory=list)
    api: Calls = field(default_factory=Calls)
    s3_list_calls: int = 0
    s3_entries_listed: int = 0
    s3_dead_letter_reads: int = 0
    s3_manifest_reads: int = 0  # ``--run``: a closed batch's or crawl's, for its item retries

    def counts(self) -> dict[str, int]:
        """How many subjects got each verdict (every verdict named, zeros included)."""
        found = Counter(f.verdict for f in self.findings)
        return {verdict.value: found[verdict] for verdict in Verdict}

    def reasons(self) -> dict[str, int]:
        """Dead-lettered subjects by the reason their record gives."""
        found = Counter(
            f.reason or "unstated" for f in self.findings if f.verdict is Verdict.DEAD_LETTERED
        )
        return dict(sorted(found.items()))

    def failures(self) -> list[Finding]:
        """The missing and doubled subjects, in the order found."""
        return [f for f in self.findings if f.verdict in FAILING]

    def record(self) -> dict[str, Any]:
        """The summary a command prints: counts, reasons, the problems by name, the calls."""
        return {
            "since": format_time(self.since),
            "until": format_time(self.until),
            "run": self.run,
            "bucket": self.bucket,
            "jobs": len(self.findings),
            **self.counts(),
            "dead_lettered_by_reason": self.reasons(),
            "problems": [problem(f) for f in self.failures()],
            "calls": {
                "job_list_pages": self.api.list_pages,
                "batch_crawl_pages": self.api.container_pages,
                "job_gets": self.api.job_gets,
                "s3_list_calls": self.s3_list_calls,
                "s3_entries_listed": self.s3_entries_listed,
                "s3_dead_letter_reads": self.s3_dead_letter_reads,
                "s3_manifest_reads": self.s3_manifest_reads,
            },
        }


def problem(finding: Finding) -> dict[str, Any]:
    """One missing or doubled subject, named."""
    s = finding.subject
    return {
        "verdict": finding.verdict.value,
        "kind": s.kind.value,
        "job_id": s.job_id,
        "item": s.item,
        "url": s.url,
        "why": finding.why,
    }


def named(findings: Sequence[Finding], shown: int = 5) -> str:
    """``extract 1 (missing), batch 2 item 3 (doubled) and 4 more``."""
    head = ", ".join(f"{f.subject.label()} ({f.verdict.value})" for f in findings[:shown])
    more = f" and {len(findings) - shown} more" if len(findings) > shown else ""
    return head + more
