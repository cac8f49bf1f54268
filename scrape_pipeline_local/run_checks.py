"""The demo's submission runs judged as their user would judge them.

Per run: ``scrape-pipeline audit --run``'s own code (the journal names the run's jobs, the API
and the bucket judge them, chains followed to each URL's final job) must agree unit by unit
with the judge over every job of the run's URLs, and subject by subject with the window audit;
and a subscriber of the bus must have received the run's ``Run Completed`` exactly once, and
only after the outcome event of every URL's final job (the last job the simulator made for it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scrape_pipeline_local.agreement import compare
from scrape_pipeline_local.bus_record import Arrival, RunArrival
from scrape_pipeline_local.demo_runs import DemoRun
from scrape_pipeline_local.judge import MAX_EXAMPLES, Outcome, Unit
from scrape_pipeline_ops.audit import AuditReport, Window, audit, of_run
from scrape_pipeline_ops.audit.known import RunJournal

# How long the demo waits, once every outcome and event came, for the runs' Run Completed:
# the run sweep reads a run's entries 100 a reconciler run (a minute), so a 1,000-job run's
# few hundred entries take a few runs; a missing one is then judged, not waited for forever.
RUN_COMPLETED_WAIT_SECONDS: Final = 600.0


def audit_run(
    client: Any,
    s3: Any,
    bucket: str,
    window: Window,
    *,
    journal: RunJournal,
    ledger: Any,
    name: str,
) -> AuditReport:
    """What ``scrape-pipeline audit --since .. --run NAME`` runs, with the stack's journal."""
    run = journal.run(name)
    if run is None:
        raise LookupError(f"no run named {name!r} in the journal")
    known = of_run(journal, run, window.since, window.until)
    return audit(client, s3, bucket, window, known, run=name, ledger=ledger)


@dataclass
class RunCheck:
    """One run: its audit, where it differs, and what the bus told of it."""

    name: str
    audit: AuditReport
    differences: list[str] = field(default_factory=list)  # with the judge, then the window's
    completions: int = 0  # Run Completed arrivals
    # URLs whose final job's outcome event came after the run's Run Completed, or never.
    early: list[str] = field(default_factory=list)
    lag_s: float | None = None  # Run Completed's arrival less the last final event's


@dataclass
class RunChecks:
    """Every run of the demo, checked."""

    checks: list[RunCheck] = field(default_factory=list)

    @property
    def missing(self) -> int:
        """Subjects the runs' audits found missing."""
        return sum(c.audit.counts()["missing"] for c in self.checks)

    @property
    def disagreements(self) -> int:
        """Units the runs' audits judged unlike the judge or the window audit."""
        return sum(len(c.differences) for c in self.checks)

    @property
    def not_once(self) -> int:
        """Runs whose Run Completed did not come exactly once."""
        return sum(1 for c in self.checks if c.completions != 1)

    @property
    def early(self) -> int:
        """URLs whose run was told complete before their final job's outcome."""
        return sum(len(c.early) for c in self.checks)

    @property
    def failed(self) -> bool:
        """A run's audit failed or disagreed, or its completion was told wrong."""
        failures = any(c.audit.failures() for c in self.checks)
        return failures or bool(self.disagreements or self.not_once or self.early)

    def examples(self) -> list[str]:
        """The first problems, named by run."""
        found = [f"{c.name}: {d}" for c in self.checks for d in c.differences]
        found += [f"{c.name}: told complete before {u}" for c in self.checks for u in c.early]
        return found[:MAX_EXAMPLES]

    def rows(self) -> list[tuple[str, str]]:
        """The report's rows (none when the demo made no run)."""
        if not self.checks:
            return []
        agrees = "agrees" if not self.disagreements else f"{self.disagreements} differences"
        lags = [c.lag_s for c in self.checks if c.lag_s is not None]
        lag = f"{max(lags):.0f} s at most" if lags else "none came"
        return [
            ("audit --run", f"{len(self.checks)} runs, {self.missing} missing, {agrees}"),
            ("AUDIT --RUN DISAGREES (JUDGE, WINDOW AUDIT)", str(self.disagreements)),
            ("RUN COMPLETED NOT EXACTLY ONCE", str(self.not_once)),
            ("RUN COMPLETED BEFORE A URL'S FINAL OUTCOME", str(self.early)),
            ("Run Completed after the run's last outcome", lag),
        ]


@dataclass(frozen=True)
class Evidence:
    """What the runs are judged against: the window audit, the judge's outcomes and rewritten
    keys, the simulator's units with their jobs, and what the bus delivered."""

    window: AuditReport
    outcomes: Mapping[Unit, Outcome]
    rewritten: Sequence[str]
    units: Sequence[tuple[Unit, Mapping[str, Any]]]
    arrivals: Sequence[Arrival]
    completions: Sequence[RunArrival]


def check_run(run: DemoRun, found: AuditReport, seen: Evidence) -> RunCheck:
    """``found`` (the run's audit) against the judge and the window audit, and the bus's
    account of the run's completion."""
    urls = set(run.urls)
    mine = [(unit, job) for unit, job in seen.units if job["url"] in urls]
    theirs = {unit: seen.outcomes[unit] for unit, _ in mine if unit in seen.outcomes}
    check = RunCheck(run.name, found)
    check.differences = compare(theirs, seen.rewritten, found).differences
    check.differences += _unlike_window(found, seen.window)
    told = sorted(a.arrived_at for a in seen.completions if a.run == run.name)
    check.completions = len(told)
    if told:
        finals = _final_events(run.urls, mine, seen.arrivals)
        check.early = [url for url, at in finals.items() if at is None or at > told[0]]
        came = [at for at in finals.values() if at is not None]
        check.lag_s = told[0] - max(came) if came else None
    return check


def _unlike_window(found: AuditReport, window: AuditReport) -> list[str]:
    """Subjects the run's audit judged otherwise than the window audit (or it had not)."""
    verdicts = {f.subject.where: f.verdict for f in window.findings}
    unlike = []
    for finding in found.findings:
        other = verdicts.get(finding.subject.where)
        if other is not finding.verdict:
            said = other.value if other is not None else "none"
            unlike.append(f"{finding.subject.label()}: run {finding.verdict.value}, window {said}")
    return unlike


def _final_events(
    urls: Sequence[str],
    units: Sequence[tuple[Unit, Mapping[str, Any]]],
    arrivals: Iterable[Arrival],
) -> dict[str, float | None]:
    """Per URL, when the first outcome event of its final job (its newest in the simulator)
    came; None: no such job, or no event for it."""
    newest: dict[str, tuple[float, Unit]] = {}
    for unit, job in units:
        at = float(job["created_at"])
        if job["url"] not in newest or at > newest[job["url"]][0]:
            newest[job["url"]] = (at, unit)
    first: dict[tuple[str, str], float] = {}  # a job's first outcome event
    for arrival in arrivals:
        key = (arrival.kind, arrival.job_id)
        first[key] = min(first.get(key, arrival.arrived_at), arrival.arrived_at)
    finals: dict[str, float | None] = {}
    for url in urls:
        final = newest[url][1] if url in newest else None
        finals[url] = None if final is None else first.get((final.kind, final.job_id))
    return finals


def check_runs(
    runs: Sequence[DemoRun], audit_one: Callable[[str], AuditReport], seen: Evidence
) -> RunChecks:
    """Every run audited by ``audit_one(name)`` and checked against ``seen``."""
    return RunChecks([check_run(run, audit_one(run.name), seen) for run in runs])
