"""``audit --since T [--until T] [--run NAME]``: did every job of a window end where it should?

Judged from the API (the job list over the window; the batches and crawls the ledger's rows or
the runs journal name, read page by page) and from the results bucket (one ListObjectVersions
pass over each kind's prefixes, one GET per dead-letter record for its reason), never from the
ledger's word; ``--run`` follows a failed job's chain to its final job (``audit.chains``).
Prints the counts per verdict; exit 1 naming each job missing or doubled (one notice line
each), 2 for a bad option or an unknown run.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from scrape_pipeline.geonode.fields import parse_time
from scrape_pipeline_ops.audit import DEFAULT_GRACE_S, Known, Window, audit, of_run, of_window
from scrape_pipeline_ops.audit.report import named
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.submit_run import LEDGER_ENV, OpenJournal, open_journal

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline.ledger.full import Ledger
    from scrape_pipeline_ops.cli.config import Context


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``audit``."""
    p = commands.add_parser(
        "audit",
        parents=parents,
        help="count a window's jobs by outcome from the API and S3; exit 1 if any is missing",
        description=(
            "For the jobs created in a window: how many were stored exactly once, "
            "dead-lettered (by reason), cancelled, still running, settling (settled within "
            "--grace), resubmitted (failed, a later job of its URL in the window), stored "
            "with more than one version (doubled), and missing. Extract jobs come from the "
            "API's job list; batches and crawls from the ledger (LEDGER_TABLE_NAME) and the "
            "runs journal, each item a job of its own; objects from RESULTS_BUCKET. With "
            "--run, a failed job or item is followed to the jobs that carry its work on, so "
            "each URL is judged by its final job. Exit 1 naming each missing or doubled job."
        ),
    )
    p.add_argument("--since", required=True, metavar="T", help="ISO 8601 start of the window")
    p.add_argument("--until", metavar="T", help="ISO 8601 end of the window (default now)")
    p.add_argument("--run", metavar="NAME", help="only the jobs of this submission run")
    p.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE_S,
        metavar="SECONDS",
        help=f"a job settled this recently is settling, not missing (default {DEFAULT_GRACE_S:g})",
    )
    p.add_argument(
        "--journal", metavar="PATH", help="the runs journal file (default as for submit)"
    )
    p.set_defaults(handler=run_audit)


def _moment(flag: str, value: str) -> float:
    moment = parse_time(value)
    if moment is None:
        raise UsageError(f"{flag} takes an ISO 8601 time, got {value[:40]!r}")
    return moment.timestamp()


def window(ctx: Context, args: argparse.Namespace) -> Window:
    """The window the options name; ``UsageError`` when it is empty or inside out."""
    now = ctx.clock.time()
    since = _moment("--since", args.since)
    until = _moment("--until", args.until) if args.until else now
    if until < since:
        raise UsageError("--until is before --since")
    if args.grace < 0:
        raise UsageError("--grace must not be negative")
    return Window(since, until, now, args.grace)


def _journal(ctx: Context, args: argparse.Namespace) -> OpenJournal | None:
    """The runs journal; without one, the window's batches and crawls come from the ledger
    alone (a ``--run`` needs it: UsageError)."""
    try:
        return open_journal(ctx, args.journal, existing=True)
    except UsageError:
        if args.run or args.journal:
            raise
        return None


def _ledger(ctx: Context) -> Ledger | None:
    """The stack's ledger, when LEDGER_TABLE_NAME names one: it says where to look."""
    table = ctx.environ.get(LEDGER_ENV)
    if not table:
        return None
    from scrape_pipeline.ledger.full import Ledger  # noqa: PLC0415

    return Ledger(table, client=ctx.aws("dynamodb"), clock=ctx.clock)


def _known(ctx: Context, args: argparse.Namespace, span: Window, ledger: Ledger | None) -> Known:
    opened = _journal(ctx, args)
    try:
        if args.run:
            assert opened is not None
            run = opened.journal.run(args.run)
            if run is None:
                raise UsageError(f"no run named {args.run!r} in {opened.where}")
            return of_run(opened.journal, run, span.since, span.until)
        journal = opened.journal if opened is not None else None
        return of_window(span.since, span.until, journal=journal, ledger=ledger)
    finally:
        if opened is not None:
            with suppress(Exception):
                opened.close()


def run_audit(ctx: Context, args: argparse.Namespace) -> int:
    """Audit the window; exit 1 when a job is missing or doubled."""
    bucket = ctx.require("RESULTS_BUCKET")["RESULTS_BUCKET"]
    span = window(ctx, args)
    ledger = _ledger(ctx)
    known = _known(ctx, args, span, ledger)
    report = audit(ctx.client(), ctx.aws("s3"), bucket, span, known, run=args.run, ledger=ledger)
    record = report.record()
    ctx.out.record(record, title=f"audit {record['since']} .. {record['until']}")
    failures = report.failures()
    for finding in failures:
        url = f" {finding.subject.url}" if finding.subject.url else ""
        ctx.out.notice(f"{finding.verdict.value}: {finding.subject.label()}{url}: {finding.why}")
    if failures:
        counts = report.counts()
        raise FailedError(
            f"{counts['missing']} missing, {counts['doubled']} doubled of "
            f"{len(report.findings)} job(s): {named(failures)}"
        )
    return 0
