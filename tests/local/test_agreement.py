"""The audit's verdicts against the judge's outcomes, unit by unit: each difference named."""

from __future__ import annotations

from scrape_pipeline.jobs import JobKind
from scrape_pipeline_local.agreement import compare, summary
from scrape_pipeline_local.judge import Outcome, Unit
from scrape_pipeline_ops.audit import AuditReport, Finding, Subject, Verdict


def report(*findings: Finding) -> AuditReport:
    return AuditReport(0.0, 1.0, "results", findings=list(findings))


def finding(kind: JobKind, job_id: str, verdict: Verdict, item: int | None = None) -> Finding:
    return Finding(Subject(kind, job_id, "completed", item=item), verdict)


EXTRACT = Unit("extract", "e1", None)
ITEM_0, ITEM_1 = Unit("batch", "b1", 0), Unit("batch", "b1", 1)


def test_the_same_outcomes_in_both_vocabularies_agree():
    # GIVEN a stored, a resubmitted, an unsettled and a cancelled unit, judged alike
    outcomes = {
        EXTRACT: Outcome.STORED,
        Unit("extract", "e2", None): Outcome.RESUBMITTED,
        ITEM_0: Outcome.UNSETTLED,
        ITEM_1: Outcome.CANCELLED,
    }
    audited = report(
        finding(JobKind.EXTRACT, "e1", Verdict.STORED),
        finding(JobKind.EXTRACT, "e2", Verdict.RESUBMITTED),
        finding(JobKind.BATCH, "b1", Verdict.RUNNING, item=0),
        finding(JobKind.BATCH, "b1", Verdict.CANCELLED, item=1),
    )
    # WHEN compared THEN nothing differs and every unit was matched
    agreement = compare(outcomes, [], audited)
    assert (agreement.differences, agreement.compared) == ([], 4)
    assert summary(audited) == "4 jobs: 1 stored, 1 cancelled, 1 running, 1 resubmitted"


def test_a_unit_judged_differently_is_named_with_both_words():
    # GIVEN the judge saw it stored; the audit finds it missing (its file deleted)
    missing = Finding(
        Subject(JobKind.EXTRACT, "e1", "completed"), Verdict.MISSING, "metadata.json not there"
    )
    # WHEN compared
    agreement = compare({EXTRACT: Outcome.STORED}, [], report(missing))
    # THEN the unit is named, with what each said
    assert agreement.differences == [
        "extract e1: judge stored, audit missing (metadata.json not there)"
    ]


def test_units_one_side_alone_knows_are_named():
    agreement = compare(
        {EXTRACT: Outcome.STORED}, [], report(finding(JobKind.EXTRACT, "e9", Verdict.STORED))
    )
    assert agreement.differences == [
        "extract e1: judge stored, audit none",
        "extract e9: audit stored, judge none",
    ]


def test_a_whole_batch_finding_speaks_for_each_of_its_items():
    # GIVEN a poison batch: the API cannot answer it, so the audit judges it as one subject
    whole = finding(JobKind.BATCH, "b1", Verdict.DEAD_LETTERED)
    outcomes = {ITEM_0: Outcome.DEAD_LETTERED, ITEM_1: Outcome.DEAD_LETTERED}
    # WHEN compared THEN both items agree with it
    agreement = compare(outcomes, [], report(whole))
    assert (agreement.differences, agreement.compared) == ([], 2)


def test_doubled_results_are_compared_with_the_keys_the_judge_saw_written_again():
    # GIVEN the judge saw e1's metadata written twice; the audit calls e1 doubled and e2 too
    audited = report(
        finding(JobKind.EXTRACT, "e1", Verdict.DOUBLED),
        finding(JobKind.EXTRACT, "e2", Verdict.DOUBLED),
    )
    e2 = Unit("extract", "e2", None)
    outcomes = {EXTRACT: Outcome.STORED, e2: Outcome.STORED}
    # WHEN compared THEN e1 agrees (stored, and twice) and e2 is named
    agreement = compare(outcomes, [EXTRACT.result_key], audited)
    assert agreement.differences == ["extract e2: audit doubled, judge not twice"]
