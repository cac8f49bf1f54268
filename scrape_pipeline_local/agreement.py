"""Whether ``scrape-pipeline audit`` (the API and the bucket) agrees with the demo's judge (the
simulator's record and the bucket), unit by unit: the audit's verdicts in the judge's words.

    stored, doubled      stored (a doubled result is compared apart: see below)
    dead_lettered        dead_lettered
    cancelled            cancelled
    resubmitted          resubmitted (both: failed, a later job of its URL replaced it)
    running, settling    unsettled (the judge skips what the simulator has not settled; the
                         demo audits with no grace, so "settling" would be a settled job)
    missing              lost

A batch or crawl the API cannot answer (a poison one: every GET malformed) is one audit subject
without an item: its verdict speaks for every unit of that job, as its dead letter does for the
judge. Doubled: the audit's doubled units are the judge's units with a result key written again.
The judge also counts a unit both stored and dead-lettered as processed twice; the audit reads
the result first and calls it stored, so that case is the judge's alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from scrape_pipeline.jobs import JobKind
from scrape_pipeline_local.judge import MAX_EXAMPLES, Outcome, Unit
from scrape_pipeline_ops.audit import AuditReport, Finding, Verdict

IN_JUDGES_WORDS: Final[Mapping[Verdict, Outcome]] = {
    Verdict.STORED: Outcome.STORED,
    Verdict.DOUBLED: Outcome.STORED,
    Verdict.DEAD_LETTERED: Outcome.DEAD_LETTERED,
    Verdict.CANCELLED: Outcome.CANCELLED,
    Verdict.RESUBMITTED: Outcome.RESUBMITTED,
    Verdict.RUNNING: Outcome.UNSETTLED,
    Verdict.SETTLING: Outcome.UNSETTLED,
    Verdict.MISSING: Outcome.LOST,
}
Where = tuple[JobKind, str, int | None]


@dataclass
class Agreement:
    """Where the audit and the judge differ, each named; none: they agree."""

    compared: int = 0  # units of the judge, each matched to an audit verdict
    differences: list[str] = field(default_factory=list)

    def note(self, difference: str) -> None:
        """One unit the two judge differently."""
        self.differences.append(difference)

    def examples(self) -> list[str]:
        """The first differences, enough to start from."""
        return self.differences[:MAX_EXAMPLES]


def _where(unit: Unit) -> Where:
    return (JobKind(unit.kind), unit.job_id, unit.index)


def _label(unit: Unit) -> str:
    """As the audit names a subject: ``extract 1234``, ``batch 1234 item 7``."""
    item = "" if unit.index is None else f" item {unit.index}"
    return f"{unit.kind} {unit.job_id}{item}"


def compare(
    outcomes: Mapping[Unit, Outcome], rewritten: Iterable[str], report: AuditReport
) -> Agreement:
    """Each of the judge's units against the audit's verdict on it, and the reverse."""
    found: dict[Where, Finding] = {f.subject.where: f for f in report.findings}
    agreement = Agreement()
    seen: set[Where] = set()
    for unit, outcome in outcomes.items():
        where = _where(unit)
        finding = found.get(where) or found.get((where[0], where[1], None))
        if finding is None:
            agreement.note(f"{_label(unit)}: judge {outcome}, audit none")
            continue
        seen.add(finding.subject.where)
        agreement.compared += 1
        said = IN_JUDGES_WORDS[finding.verdict]
        if said is not outcome:
            agreement.note(
                f"{finding.subject.label()}: judge {outcome}, audit {finding.verdict.value}"
                + (f" ({finding.why})" if finding.why else "")
            )
    for where, finding in found.items():
        if where not in seen:
            agreement.note(f"{finding.subject.label()}: audit {finding.verdict.value}, judge none")
    by_prefix = {unit.result_key.rsplit("/", 1)[0]: unit for unit in outcomes}
    prefixes = (key.rsplit("/", 1)[0] for key in rewritten)
    twice = {by_prefix[prefix] for prefix in prefixes if prefix in by_prefix}
    doubled = {f.subject.where for f in report.findings if f.verdict is Verdict.DOUBLED}
    for unit in twice:
        if _where(unit) not in doubled:
            agreement.note(f"{_label(unit)}: judge twice, audit not doubled")
    judged_twice = {_where(u) for u in twice}
    for where in doubled - judged_twice:
        agreement.note(f"{found[where].subject.label()}: audit doubled, judge not twice")
    return agreement


def summary(report: AuditReport) -> str:
    """``96 jobs: 90 stored, 4 dead_lettered, 2 resubmitted`` (verdicts with none left out)."""
    counts = ", ".join(f"{n} {verdict}" for verdict, n in report.counts().items() if n)
    return f"{len(report.findings)} jobs: {counts or 'none'}"
