"""``runs list``, ``runs show RUN`` and ``runs resolve RUN``: where submission runs stand.

They read the journal ``submit`` writes: with a stack the ledger table's, else (or with
``--journal``) the file (``submit_run.open_journal``). ``list`` and ``show`` join each run's
job ids with how the jobs ended (``job_outcomes``: the ledger's rows with a stack, what
``poll`` kept without). A run is complete when nothing of it is planned, posting or in doubt
(a rejected URL is settled: the API said no) and every job it made has settled, a job
resubmitted followed to the job that carries on for it (the run sweep's rule); ``show``
exits 1 until then (naming what is missing, each entry in doubt on stderr, as ``submit``
does), 2 for an unknown run. ``resolve`` looks extracts in doubt up in the job list, and
batches and crawls in doubt up in the webhook delivery log (and, with a stack, the ledger's
rows), and adopts what it finds; ``--repost-in-doubt`` is the operator's explicit order to
post again what is still in doubt (a batch or crawl goes back to planned for the next ``submit``; an
extract the lookup did not find is posted now). Its verdict is the journal's alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.runs.completion import OPEN
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.journal import Entry, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import Run, RunMode
from scrape_pipeline.runs.posting import SubmitterSettings
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.job_outcomes import (
    FileOutcomes,
    JobOutcome,
    LedgerOutcomes,
    Outcomes,
    totals,
)
from scrape_pipeline_ops.cli.submit_run import (
    OpenJournal,
    cli_listing_lag,
    evidence_source,
    open_journal,
    separate_announcer,
    tell_catching_up,
)

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline.geonode.models import BatchItem, BatchStatus, Job, JobSummary, SubmittedJob
    from scrape_pipeline.geonode.webhooks import Delivery, Webhook
    from scrape_pipeline_ops.cli.config import Context

S = EntryState
# States in the order a summary shows them; OPEN's keep a run from being complete (the run
# sweep's rule too: scrape_pipeline.runs.completion).
SHOWN: Final = (S.PLANNED, S.POSTING, S.SUBMITTED, S.REJECTED, S.IN_DOUBT)
JOINED: Final = ("settled", "stored", "dead_lettered", "tokens_charged")
LIST_COLUMNS: Final = (
    "run",
    "mode",
    "urls",
    *(s.value for s in SHOWN),
    *JOINED,
    "complete",
    "created_at",
)
URL_COLUMNS: Final = ("entry", "state", "job_id", "outcome", "url", "reason")
# runs show --wait: a read of the journal and its jobs' rows every few seconds, an hour at most.
WAIT_STEP_SECONDS: Final = 2.0
MAX_WAIT_SECONDS: Final = 3600.0


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``runs list|show|resolve``."""
    p = commands.add_parser(
        "runs",
        parents=parents,
        help="list submission runs, show one, resolve what is in doubt",
        description=(
            "Read the run journal that 'submit' writes: with a stack (--stack-name or "
            "LEDGER_TABLE_NAME) in the ledger table, else (or with --journal) the file "
            "$SCRAPE_PIPELINE_JOURNAL, else $XDG_STATE_HOME/scrape-pipeline/runs.sqlite3. "
            "Counts are URLs; settled, stored, dead_lettered and tokens_charged come from "
            "the ledger (a stack) or from what 'poll' saw (no stack). A run is complete when "
            "nothing is planned, posting or in doubt and every job has settled; 'show' exits "
            "1 until then, 'resolve' while anything is planned, posting or in doubt; 2 for an "
            "unknown run."
        ),
    )
    sub = p.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    journal = _journal_option()
    listing = sub.add_parser(
        "list", parents=[*parents, journal], help="every run, with its URLs by state"
    )
    listing.set_defaults(handler=run_list)
    show = sub.add_parser(
        "show", parents=[*parents, journal], help="one run: its URLs by state; exit 1 if open"
    )
    show.add_argument("name", metavar="RUN")
    show.add_argument(
        "--urls", action="store_true", help="one line per URL: state, job id, outcome, reason"
    )
    show.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="read the run again every few seconds until it is complete, for at most SECONDS "
        "(the pipeline stores a job a few seconds after the API settles it)",
    )
    show.set_defaults(handler=run_show)
    resolve = sub.add_parser(
        "resolve",
        parents=[*parents, journal],
        help="look up what is in doubt; --repost-in-doubt to post it again",
        description=(
            "Expire posting leases that ran out, look each extract in doubt up in the job "
            "list, and each batch or crawl in doubt up in the webhook delivery log (with a "
            "stack, the ledger's rows too), and adopt the job found. With --repost-in-doubt, "
            "an extract not found is posted again now, and a batch or crawl still in doubt "
            "goes back to planned so that the next 'submit' of the run posts it again (no "
            "API lists batches or crawls: only you can tell it was not created)."
        ),
    )
    resolve.add_argument("name", metavar="RUN")
    resolve.add_argument(
        "--repost-in-doubt",
        action="store_true",
        help="post again what is still in doubt (it may be paid twice if the API had it)",
    )
    resolve.set_defaults(handler=run_resolve)


def _journal_option() -> argparse.ArgumentParser:
    import argparse  # noqa: PLC0415 - only for the parent parser

    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--journal",
        metavar="PATH",
        help="use the SQLite journal file at PATH, even with a stack (default as for submit)",
    )
    return parent


@contextmanager
def _opened(ctx: Context, args: argparse.Namespace) -> Iterator[OpenJournal]:
    """The journal submit wrote (the stack's table, or the file), closed after."""
    opened = open_journal(ctx, args.journal, existing=True)
    try:
        yield opened
    finally:
        opened.close()


def _run(opened: OpenJournal, name: str) -> Run:
    run = opened.journal.run(name)
    if run is None:
        raise UsageError(f"no run named {name!r} in {opened.where} (runs list shows them)")
    return run


@contextmanager
def _outcomes(ctx: Context, opened: OpenJournal) -> Iterator[Outcomes]:
    """The ledger's outcomes with a stack, else those poll kept in the journal file."""
    if opened.path is None:
        table = str(ctx.environ.get("LEDGER_TABLE_NAME"))
        yield LedgerOutcomes(table, client=ctx.aws("dynamodb"))
        return
    local = FileOutcomes(opened.path)
    try:
        yield local
    finally:
        local.close()


def _joined(source: Outcomes, run: Run, entries: Sequence[Entry]) -> dict[str, JobOutcome]:
    """The outcome of each job the run's entries recorded (a job not known is absent): the
    source is the ledger, or what poll kept in the journal file."""
    job_ids = [e.job_id for e in entries if e.state is S.SUBMITTED and e.job_id]
    return source.outcomes(JobKind(run.mode.kind), job_ids) if job_ids else {}


def _unsettled(entries: Iterable[Entry], found: Mapping[str, JobOutcome]) -> list[Entry]:
    """Submitted entries whose job has not settled (or is not known to have)."""
    return [
        e
        for e in entries
        if e.state is S.SUBMITTED
        and not (e.job_id and e.job_id in found and found[e.job_id].settled)
    ]


def summary(
    run: Run, entries: Sequence[Entry], found: Mapping[str, JobOutcome] | None = None
) -> dict[str, Any]:
    """A run's URLs (and entries) by state, its jobs' outcomes, and whether it is complete.

    Complete: nothing planned, posting or in doubt, and (with ``found``) every job settled;
    without ``found`` the outcomes are not known (None).
    """
    urls = Counter[str]()
    for entry in entries:
        urls[entry.state.value] += len(entry.urls)
    record: dict[str, Any] = {"run": run.name, "mode": run.mode.value, "urls": run.urls}
    record.update({state.value: urls.get(state.value, 0) for state in SHOWN})
    complete = not any(e.state in OPEN for e in entries)
    if found is not None:
        record.update(totals(((len(e.urls), e.job_id) for e in entries), found))
        complete = complete and not _unsettled(entries, found)
    else:
        record.update(dict.fromkeys(JOINED))
    record["complete"] = complete
    record["entries"] = run.entries
    if run.mode is RunMode.BATCH:
        by_entry = Counter(e.state.value for e in entries)
        record["entries_by_state"] = {s.value: by_entry[s.value] for s in SHOWN if by_entry[s]}
    record["options"] = dict(run.options)
    record["created_at"] = run.created_at
    return record


def _outcome_word(outcome: JobOutcome | None) -> str | None:
    if outcome is None or not outcome.settled:
        return None
    if outcome.stored:
        return "stored"
    return "dead_lettered" if outcome.dead_lettered else "settled"


def _url_rows(entries: Sequence[Entry], found: Mapping[str, JobOutcome]) -> list[dict[str, Any]]:
    rows = []
    for entry in entries:
        state = "in doubt" if entry.state is S.IN_DOUBT else entry.state.value
        reason = entry.reason if entry.state in (S.REJECTED, S.IN_DOUBT) else None
        job = found.get(entry.job_id or "")
        job_id = job.job_id if job else entry.job_id  # the last job of its chain
        for url in entry.urls:
            outcome = _outcome_word(job.of_url(url) if job else None)
            row = {"entry": entry.index, "state": state, "job_id": job_id}
            rows.append({**row, "outcome": outcome, "url": url, "reason": reason})
    return rows


def _verdict(
    ctx: Context,
    run: Run,
    entries: Sequence[Entry],
    found: Mapping[str, JobOutcome] | None = None,
) -> int:
    """Name each entry in doubt on stderr; exit 0 only when the run is complete."""
    for entry in entries:
        if entry.state is S.IN_DOUBT:
            ctx.out.notice(f"in doubt: {entry.label()}: {entry.reason}")
    counts = Counter(e.state for e in entries)
    problems = [
        f"{counts[state]} entr{'y' if counts[state] == 1 else 'ies'} "
        f"{'in doubt' if state is S.IN_DOUBT else state.value}"
        for state in OPEN
        if counts[state]
    ]
    unsettled = _unsettled(entries, found) if found is not None else []
    if unsettled:
        jobs = ", ".join(str(e.job_id) for e in unsettled[:5])
        more = f" and {len(unsettled) - 5} more" if len(unsettled) > 5 else ""
        problems.append(f"{len(unsettled)} job(s) not settled: {jobs}{more}")
    if problems:
        raise FailedError(f"run {run.name} is not complete: {'; '.join(problems)}")
    return 0


def run_list(ctx: Context, args: argparse.Namespace) -> int:
    """Every run in the journal, oldest first, joined with its jobs' outcomes."""
    with _opened(ctx, args) as opened, _outcomes(ctx, opened) as source:
        rows = []
        for run in opened.journal.runs():
            entries = opened.journal.entries(run.name)
            rows.append(summary(run, entries, _joined(source, run, entries)))
    if not rows:
        ctx.out.note("no runs")
    else:
        ctx.out.table(rows, LIST_COLUMNS)
    return 0


def run_show(ctx: Context, args: argparse.Namespace) -> int:
    """One run by state (and by URL with ``--urls``); exit 1 while it is not complete.

    With ``--wait``, the run is read again every ``WAIT_STEP_SECONDS`` until it is complete or
    the wait is over; what is shown is the last read.
    """
    if not 0 <= args.wait <= MAX_WAIT_SECONDS:
        raise UsageError(f"--wait takes 0 to {MAX_WAIT_SECONDS:g} seconds, got {args.wait:g}")
    deadline = ctx.clock.monotonic() + args.wait
    with _opened(ctx, args) as opened, _outcomes(ctx, opened) as source:
        run = _run(opened, args.name)
        while True:
            entries = opened.journal.entries(run.name)
            found = _joined(source, run, entries)
            left = deadline - ctx.clock.monotonic()
            if summary(run, entries, found)["complete"] or left <= 0:
                break
            ctx.clock.sleep(min(WAIT_STEP_SECONDS, left))
    if args.urls:
        ctx.out.table(_url_rows(entries, found or {}), URL_COLUMNS)
    else:
        ctx.out.record(summary(run, entries, found), title=f"run {run.name}")
    return _verdict(ctx, run, entries, found)


class _OnFirstUse:
    """The API client, made (and its key asked for) only when the engine calls the API: a
    run is resolved without a key unless one of its entries is in doubt."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def submit_extract(self, url: str, **options: Any) -> SubmittedJob:
        return self._ctx.client().submit_extract(url, **options)

    def create_batch(self, urls: Iterable[str], **options: Any) -> SubmittedJob:
        return self._ctx.client().create_batch(urls, **options)

    def create_crawl(self, url: str, **options: Any) -> SubmittedJob:
        return self._ctx.client().create_crawl(url, **options)

    def iter_jobs(self, **filters: Any) -> Iterator[JobSummary]:
        return self._ctx.client().iter_jobs(**filters)

    def get_job(self, job_id: str) -> Job:
        return self._ctx.client().get_job(job_id)

    def get_batch(self, batch_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        return self._ctx.client().get_batch(batch_id, page=page, page_size=page_size)

    def iter_batch_items(self, batch_id: str) -> Iterator[BatchItem]:
        return self._ctx.client().iter_batch_items(batch_id)

    def get_crawl(self, crawl_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        return self._ctx.client().get_crawl(crawl_id, page=page, page_size=page_size)

    def list_webhooks(self) -> list[Webhook]:
        try:
            client = self._ctx.client()
        except UsageError as exc:
            # Never a repost without the look first: a batch the log names is paid once.
            raise UsageError(f"a batch or crawl in doubt is looked up in the API: {exc}") from exc
        return client.list_webhooks()

    def iter_deliveries(
        self, webhook_id: str, *, status: str | None = None, start_page: int = 1
    ) -> Iterator[Delivery]:
        return self._ctx.client().iter_deliveries(webhook_id, status=status, start_page=start_page)


def run_resolve(ctx: Context, args: argparse.Namespace) -> int:
    """Resolve what the lookups can; with ``--repost-in-doubt``, post the rest again.

    Its verdict is the journal's (nothing planned, posting or in doubt): ``runs show`` says
    whether the jobs have settled too.
    """
    with _opened(ctx, args) as opened:
        run = _run(opened, args.name)
        # A batch or crawl a file journal recorded but did not announce (a crash between the
        # two writes) is announced; the DynamoDB journal's were born announced.
        announce = separate_announcer(ctx, opened, run.mode)
        # An operator's call, before a repost that may pay twice: worth a Scan of the ledger
        # for rows already DONE and the delivery log's pages too (evidence_source).
        api = _OnFirstUse(ctx)
        evidence = evidence_source(ctx, api, operator=True)
        # An extract in doubt is looked up (and, ordered, re-posted) only once the job list
        # covers its POST: the wait is the listing lag allowed for.
        lag = cli_listing_lag(ctx)
        settings = SubmitterSettings(listing_delay_s=lag)
        submitter = Submitter(
            opened.journal,
            api,
            clock=ctx.clock,
            pace=Pace(ctx.clock),
            announce=announce,
            evidence=evidence,
            settings=settings,
            listener=lambda event: tell_catching_up(ctx, event, lag),
        )
        entries = submitter.settle(run, post_unfound=args.repost_in_doubt)
        if args.repost_in_doubt and run.mode is not RunMode.ASYNC:
            entries = _repost(ctx, opened, run, entries)
    ctx.out.record(summary(run, entries), title=f"run {run.name}")
    return _verdict(ctx, run, entries)


def _repost(ctx: Context, opened: OpenJournal, run: Run, entries: Sequence[Entry]) -> list[Entry]:
    """Each batch or crawl in doubt back to planned, named on stderr; the entries after."""
    for entry in entries:
        if entry.state is not S.IN_DOUBT:
            continue
        try:
            opened.journal.repost(run, entry, ctx.clock.time())
        except MoveRefusedError:
            continue  # another operator moved it first
        ctx.out.notice(f"planned again: {entry.label()} (the next submit of the run posts it)")
    return opened.journal.entries(run.name)


__all__: Sequence[str] = ("add_parser", "run_list", "run_resolve", "run_show", "summary")
