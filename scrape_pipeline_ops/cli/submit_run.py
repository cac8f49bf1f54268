"""``submit`` in async, batch or crawl mode: the URLs become a run, posted through its journal.

The journal (``open_journal``): with a stack (``--stack-name``, or LEDGER_TABLE_NAME), the
DynamoDB journal in the ledger's table (``scrape_pipeline.runs.dynamodb``), where a batch
or crawl is announced to the ledger in the same write that records its job id; without one,
or with ``--journal PATH``, a SQLite file (``scrape_pipeline_ops.runs.sqlite``): the flag,
else ``$SCRAPE_PIPELINE_JOURNAL``, else ``$XDG_STATE_HOME/scrape-pipeline/runs.sqlite3``
(``~/.local/state/...`` without XDG_STATE_HOME), which announces by a write of its own
(``announcer``) when LEDGER_TABLE_NAME is set. A run is named by ``--run`` or after its
URLs, mode and options; the first stderr line names it and what it resumed. Running the same
command again posts only what was not submitted, and adopts a batch or crawl in doubt that
evidence names (``evidence_source``: the delivery log without a stack, the ledger with one).
Exit 1 while an entry is in doubt (each is named on stderr), rejected, or left planned by a
stop (402, throttling).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.evidence import CandidateSource, DeliveryLog, DeliveryLogCandidates
from scrape_pipeline.runs.journal import RunMismatchError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import BadPlanError, RunMode, RunSpec, post_options
from scrape_pipeline.runs.posting import SubmitterSettings
from scrape_pipeline.runs.report import CatchingUp, Event, EventKind, Planned, RunReport
from scrape_pipeline.wiring.shared import listing_lag
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.progress import Progress
from scrape_pipeline_ops.runs.evidence import AnyOf, LedgerCandidates
from scrape_pipeline_ops.runs.sqlite import SqliteJournal
from scrape_pipeline_ops.runs.table import TableJournal

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

JOURNAL_ENV = "SCRAPE_PIPELINE_JOURNAL"
JOURNAL_FILE = Path("scrape-pipeline") / "runs.sqlite3"
LEDGER_ENV = "LEDGER_TABLE_NAME"
COLUMNS = ("job_id", "kind", "status", "url")
_NAMED = 5  # in-doubt entries named in the error line (every one has its own stderr line)
S = EntryState


def journal_path(flag: str | None, environ: Mapping[str, str]) -> Path:
    """Where the journal file is: the flag, the variable, or the user's state folder."""
    chosen = flag or environ.get(JOURNAL_ENV)
    if chosen:
        return Path(chosen).expanduser()
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / JOURNAL_FILE


@dataclass(frozen=True)
class OpenJournal:
    """The journal a command works with, what to call it, and whether it announces itself."""

    journal: SqliteJournal | TableJournal
    where: str  # the file's path, or "DynamoDB table NAME"
    announces: bool  # batches and crawls join the ledger in the write of their job id
    path: Path | None = None  # the file, for a file journal

    def close(self) -> None:
        """Close the file (a table has nothing to close)."""
        self.journal.close()


def _ttl_days(ctx: Context) -> int:
    from scrape_pipeline.ledger.table import DEFAULT_TTL_DAYS  # noqa: PLC0415

    return int(ctx.environ.get("LEDGER_TTL_DAYS") or DEFAULT_TTL_DAYS)


def open_journal(ctx: Context, flag: str | None, *, existing: bool = False) -> OpenJournal:
    """The stack's journal in the ledger table, else (or with ``--journal``) the file.

    ``existing``: a command that only reads must not create an empty file where the user
    expected theirs (``UsageError`` instead).
    """
    table = ctx.environ.get(LEDGER_ENV)
    if table and not flag:
        journal = TableJournal(table, client=ctx.aws("dynamodb"), ttl_days=_ttl_days(ctx))
        return OpenJournal(journal, f"DynamoDB table {table}", announces=True)
    path = journal_path(flag, ctx.environ)
    if existing and not path.is_file():
        raise UsageError(f"no run journal at {path} (submit writes it; see --journal)")
    return OpenJournal(SqliteJournal(path), str(path), announces=False, path=path)


def announcer(ctx: Context) -> Callable[[str, str], None] | None:
    """``announce(kind, job_id)``: record a batch or crawl in the ledger, when there is one."""
    table = ctx.environ.get(LEDGER_ENV)
    if not table:
        return None
    from scrape_pipeline.jobs import JobKind  # noqa: PLC0415
    from scrape_pipeline.ledger.full import Ledger  # noqa: PLC0415
    from scrape_pipeline_ops.submissions import expect  # noqa: PLC0415

    ledger = Ledger(table, client=ctx.aws("dynamodb"), ttl_days=_ttl_days(ctx), clock=ctx.clock)

    def announce(kind: str, job_id: str) -> None:
        try:
            expect(ledger, JobKind(kind), job_id)
        except AWSUnavailableError as exc:
            raise FailedError(
                f"{kind} {job_id} was submitted but not announced to the ledger ({exc.code}); "
                "run the same command again to announce it"
            ) from exc

    return announce


def separate_announcer(
    ctx: Context, opened: OpenJournal, mode: RunMode
) -> Callable[[str, str], None] | None:
    """The announcement as a write of its own: only for a batch or crawl in a file journal
    (the DynamoDB journal's entry is born announced, in the write of its job id)."""
    if opened.announces or mode is RunMode.ASYNC:
        return None
    return announcer(ctx)


def evidence_source(ctx: Context, log: DeliveryLog, *, operator: bool = False) -> CandidateSource:
    """Where a batch or crawl in doubt may be named before anything is re-posted.

    Without a stack, the account's webhook delivery log (``log``: failed deliveries are
    logged too, so a subscription nobody receives still names its jobs). With one, the
    ledger's rows: the receiver and the reconciler's delivery-log sweep feed it, and a
    ``submit`` rerun reads it without spending the API's rate limit. ``operator`` (``runs
    resolve``, before a repost that may pay twice) with a stack also scans the ledger for
    rows already DONE and reads the delivery log too, for what the ledger has not heard of
    yet (the sweep's lag, a subscription pointing elsewhere).
    """
    table = ctx.environ.get(LEDGER_ENV)
    delivery_log = DeliveryLogCandidates(log)
    if not table:
        return delivery_log
    from scrape_pipeline.ledger.full import Ledger  # noqa: PLC0415

    ledger = Ledger(table, client=ctx.aws("dynamodb"), clock=ctx.clock)
    rows = LedgerCandidates(ledger, scan_done=operator)
    return AnyOf(rows, delivery_log) if operator else rows


class _Lines:
    """Prints each entry's news as it happens: one result line, or a notice on stderr."""

    def __init__(self, ctx: Context, mode: RunMode, announcing: bool, lag_s: float) -> None:
        self.ctx = ctx
        self.lag_s = lag_s
        self.mode = mode
        self.announcing = announcing and mode is not RunMode.ASYNC

    def __call__(self, event: Event) -> None:
        entry = event.entry
        line: dict[str, Any] = {"job_id": entry.job_id, "kind": self.mode.kind}
        line["url"] = None if self.mode is RunMode.BATCH else entry.urls[0]
        if self.mode is RunMode.BATCH:
            line["urls"] = len(entry.urls)
        if event.kind is EventKind.CATCHING_UP:
            tell_catching_up(self.ctx, event, self.lag_s)
            return
        if event.kind is EventKind.WAITING:
            until = format_time(entry.lease_until or 0.0)
            self.ctx.out.notice(
                f"waiting for {entry.label()}: another submitter posts it ({until})"
            )
            return
        if event.kind in (EventKind.SUBMITTED, EventKind.ADOPTED):
            line["status"] = event.api_status
            line["submitted_at"] = format_time(entry.posted_at or 0.0)
            if event.kind is EventKind.ADOPTED:
                line["adopted"] = True
            if self.announcing:
                line["announced"] = entry.announced
        else:
            line["status"] = entry.state.value
            line["error"] = entry.reason
        line.update(run=entry.run, entry=entry.index)
        self.ctx.out.row(line, COLUMNS)


def tell_catching_up(ctx: Context, event: Event, lag_s: float) -> None:
    """On stderr: an entry in doubt waits for the job list to cover its POST, until when."""
    if event.kind is EventKind.CATCHING_UP:
        entry = event.entry
        wait = CatchingUp(1, (entry.posted_at or 0.0) + lag_s, lag_s)
        ctx.out.notice(f"{entry.label()}: {wait.why}")


def cli_listing_lag(ctx: Context) -> float:
    """The listing lag allowed for: the reconciler's measure in the stack's ledger, if any."""
    table = ctx.environ.get(LEDGER_ENV)
    ledger = None
    if table:
        from scrape_pipeline.ledger.full import Ledger  # noqa: PLC0415

        ledger = Ledger(table, client=ctx.aws("dynamodb"), clock=ctx.clock)
    return listing_lag(ctx.environ, ledger, ctx.clock).allowed()


def _spec(args: argparse.Namespace, urls: Sequence[str], formats: Sequence[str]) -> RunSpec:
    options = post_options(formats, args.render_js, args.max_pages)
    try:
        return RunSpec.of(urls, RunMode(args.mode), options, batch_size=args.batch_size)
    except BadPlanError as exc:
        raise UsageError(f"--batch-size: {exc}") from exc


def _plan(submitter: Submitter, spec: RunSpec, name: str | None) -> Planned:
    try:
        return submitter.plan(spec, name)
    except (BadPlanError, RunMismatchError) as exc:
        raise UsageError(f"--run: {exc}") from exc


def _resumed(planned: Planned, where: str) -> str:
    """The first stderr line: the run's name, and what it found in the journal."""
    run = planned.run
    if planned.created:
        entries = f"{run.entries} batch(es)" if run.mode is RunMode.BATCH else "as many jobs"
        found = f"planned {run.urls} URL(s) in {entries}"
    else:
        found_in = planned.resumed
        counts = ", ".join(f"{found_in[state]} {state}" for state in S if state in found_in)
        found = f"resumed ({counts})"
    return f"run {run.name}: {found}; journal {where}"


def _problems(report: RunReport) -> list[str]:
    """What keeps the run from being complete, one phrase each."""
    problems = []
    doubts = report.where(S.IN_DOUBT)
    if doubts:
        named = ", ".join(e.label() for e in doubts[:_NAMED])
        more = f" and {len(doubts) - _NAMED} more" if len(doubts) > _NAMED else ""
        problems.append(
            f"{len(doubts)} entr{'y' if len(doubts) == 1 else 'ies'} in doubt: {named}{more}"
        )
    if report.stopped is not None:
        left = len(report.where(S.PLANNED))
        problems.append(f"stopped ({report.stopped.reason}) with {left} entr(ies) left planned")
    held = report.where(S.POSTING)
    if held:
        problems.append(f"{len(held)} entr(ies) still being posted by another submitter")
    rejected = sum(len(e.urls) for e in report.where(S.REJECTED))
    if rejected:
        problems.append(f"{rejected} of {report.run.urls} URL(s) rejected by the API")
    return problems


def run_submission(
    ctx: Context, args: argparse.Namespace, urls: Sequence[str], formats: Sequence[str]
) -> int:
    """Plan the URLs as a run, post what is not submitted, and say where the run stands."""
    spec = _spec(args, urls, formats)
    opened = open_journal(ctx, args.journal)
    try:
        announce = separate_announcer(ctx, opened, spec.mode)
        client = ctx.client()
        # 429s reach the submitter's pace, which slows every worker, not one worker's retries.
        client.retry = replace(client.retry, max_attempts=1)
        lag = cli_listing_lag(ctx)
        lines = _Lines(ctx, spec.mode, opened.announces or announce is not None, lag)
        progress = Progress(ctx.out.stderr, ctx.clock, then=lines)
        submitter = Submitter(
            opened.journal,
            client,
            clock=ctx.clock,
            announce=announce,
            listener=progress,
            pace=Pace(ctx.clock),
            # An extract in doubt is looked up once the job list covers its POST, never before.
            settings=SubmitterSettings(listing_delay_s=lag),
            # A rerun adopts a batch or crawl in doubt once evidence names it. The delivery
            # log is read by a client of its own: this one does not retry (its 429s are the
            # pace's), and a read that fails only leaves the entry in doubt until next time.
            evidence=evidence_source(ctx, ctx.client(ctx.api_key())),
        )
        planned = _plan(submitter, spec, args.run)
        ctx.out.notice(_resumed(planned, opened.where))
        with progress.shown(planned, lambda: submitter.throttled):
            report = submitter.work(planned)
    finally:
        opened.close()
    for entry in report.where(S.IN_DOUBT):
        ctx.out.notice(f"in doubt: {entry.label()}: {entry.reason}")
    problems = _problems(report)
    if problems:
        raise FailedError(
            "; ".join(problems) + f" (run {report.run.name}; the same command resumes it)"
        )
    return 0
