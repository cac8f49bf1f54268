"""The demo's run checks (``scrape_pipeline_local.run_checks``): a run's audit against the judge
and the window audit, and its Run Completed against its URLs' final outcome events. The chaos
matrix runs them on the local stack; these pin what they call a problem."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.runs.plan import RunMode
from scrape_pipeline_local.bus_record import Arrival, RunArrival
from scrape_pipeline_local.demo_runs import ASYNC_RUN, BATCH_RUN, DemoRun, split
from scrape_pipeline_local.judge import Outcome, Unit
from scrape_pipeline_local.run_checks import Evidence, RunChecks, check_run
from scrape_pipeline_ops.audit import AuditReport, Finding, Subject, Verdict

RUN = DemoRun(ASYNC_RUN, RunMode.ASYNC, ("https://x.test/1", "https://x.test/2"))
# URL 1: job a failed retryably and its resubmission b was stored; URL 2: job c stored.
# Job d is another URL's, outside the run.
UNITS: list[tuple[Unit, Mapping[str, Any]]] = [
    (Unit("extract", "a", None), {"url": "https://x.test/1", "created_at": 10.0}),
    (Unit("extract", "b", None), {"url": "https://x.test/1", "created_at": 20.0}),
    (Unit("extract", "c", None), {"url": "https://x.test/2", "created_at": 11.0}),
    (Unit("extract", "d", None), {"url": "https://x.test/3", "created_at": 12.0}),
]
OUTCOMES = {
    Unit("extract", "a", None): Outcome.RESUBMITTED,
    Unit("extract", "b", None): Outcome.STORED,
    Unit("extract", "c", None): Outcome.STORED,
    Unit("extract", "d", None): Outcome.STORED,
}
EVENTS = [
    Arrival("eb", "Job Stored", "extract", "b", arrived_at=100.0, stored_at=99.0),
    Arrival("ec", "Job Stored", "extract", "c", arrived_at=50.0, stored_at=49.0),
]


def _report(verdicts: Mapping[str, Verdict]) -> AuditReport:
    report = AuditReport(0.0, 200.0, "bucket")
    for job_id, verdict in verdicts.items():
        subject = Subject(JobKind.EXTRACT, job_id, "completed")
        report.findings.append(Finding(subject, verdict))
    return report


RIGHT = {"a": Verdict.RESUBMITTED, "b": Verdict.STORED, "c": Verdict.STORED}
WINDOW = _report({**RIGHT, "d": Verdict.STORED})


def _evidence(told_at: tuple[float, ...], window: AuditReport = WINDOW) -> Evidence:
    completions = [RunArrival(RUN.name, "r", at) for at in told_at]
    return Evidence(window, OUTCOMES, [], UNITS, EVENTS, completions)


def test_run_checks_a_run_told_complete_after_its_urls_final_outcomes_passes():
    # WHEN the run's audit judges each of its URLs' jobs as the judge and the window audit do,
    # and its one Run Completed came 20 s after the last final job's event
    found = check_run(RUN, _report(RIGHT), _evidence((120.0,)))
    checks = RunChecks([found])
    # THEN nothing is wrong, and the lag is measured from the resubmission's event
    assert (found.differences, found.early, found.completions) == ([], [], 1)
    assert found.lag_s == 20.0
    assert not checks.failed
    assert checks.rows()[0] == ("audit --run", "1 runs, 0 missing, agrees")


def test_run_checks_a_completion_before_a_resubmissions_outcome_is_early():
    # WHEN the run was told complete after its first job's failure, before its successor's
    # outcome event (the run followed the first job, not the chain)
    found = check_run(RUN, _report(RIGHT), _evidence((80.0,)))
    # THEN that URL is named early, and the checks fail
    assert found.early == ["https://x.test/1"]
    assert RunChecks([found]).failed


def test_run_checks_a_missing_or_repeated_completion_fails():
    assert check_run(RUN, _report(RIGHT), _evidence(())).completions == 0
    twice = check_run(RUN, _report(RIGHT), _evidence((120.0, 130.0)))
    assert RunChecks([twice]).not_once == 1


def test_run_checks_an_audit_unlike_the_judge_or_the_window_audit_differs():
    # WHEN the run's audit stopped at the failed job (missing) and never judged its successor
    found = check_run(
        RUN, _report({"a": Verdict.MISSING, "c": Verdict.STORED}), _evidence((120.0,))
    )
    # THEN both are named: against the judge, and against the window audit
    assert "extract a: judge resubmitted, audit missing" in found.differences
    assert "extract b: judge stored, audit none" in found.differences
    assert "extract a: run missing, window resubmitted" in found.differences
    assert RunChecks([found]).failed


def test_split_sends_a_share_of_each_list_to_a_run_of_its_own():
    extracts = [f"https://x.test/e{i}" for i in range(10)]
    batch = [f"https://x.test/b{i}" for i in range(6)]
    parts = split(extracts, batch, 0.5, batch_size=4)
    assert (parts.extracts, parts.batch_urls) == (extracts[:5], batch[:3])
    assert parts.runs == [
        DemoRun(ASYNC_RUN, RunMode.ASYNC, tuple(extracts[5:])),
        DemoRun(BATCH_RUN, RunMode.BATCH, tuple(batch[3:]), 4),
    ]
    none = split(extracts, batch, 0.0, batch_size=4)
    assert (none.extracts, none.batch_urls, none.runs) == (extracts, batch, [])
