"""``runs list``, ``runs show RUN`` and ``runs resolve RUN``: where submission runs stand.

They read the journal ``submit`` writes (the same ``--journal`` / ``$SCRAPE_PIPELINE_JOURNAL``
resolution). A run is complete when nothing of it is planned, posting or in doubt (a rejected
URL is settled: the API said no); ``show`` and ``resolve`` exit 1 until then and name each
entry in doubt on stderr, as ``submit`` does. ``resolve`` looks extracts in doubt up in the
job list and adopts what it finds; ``--repost-in-doubt`` is the operator's explicit order to
post again what is still in doubt (a batch or crawl goes back to planned for the next
``submit``; an extract the lookup did not find is posted now).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.journal import Entry, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import Run, RunMode
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.submit_run import announcer, journal_path
from scrape_pipeline_ops.runs.sqlite import SqliteJournal

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

S = EntryState
# States in the order a summary shows them; the first three keep a run from being complete.
OPEN: Final = (S.PLANNED, S.POSTING, S.IN_DOUBT)
SHOWN: Final = (S.PLANNED, S.POSTING, S.SUBMITTED, S.REJECTED, S.IN_DOUBT)
LIST_COLUMNS: Final = ("run", "mode", "urls", *(s.value for s in SHOWN), "complete", "created_at")
URL_COLUMNS: Final = ("entry", "state", "job_id", "url", "reason")


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``runs list|show|resolve``."""
    p = commands.add_parser(
        "runs",
        parents=parents,
        help="list submission runs, show one, resolve what is in doubt",
        description=(
            "Read the run journal that 'submit' writes (--journal, else "
            "$SCRAPE_PIPELINE_JOURNAL, else $XDG_STATE_HOME/scrape-pipeline/runs.sqlite3). "
            "Counts are URLs. A run is complete when nothing is planned, posting or in doubt; "
            "'show' and 'resolve' exit 1 until then, 2 for an unknown run."
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
    show.add_argument("--urls", action="store_true", help="one line per URL: state, job id, reason")
    show.set_defaults(handler=run_show)
    resolve = sub.add_parser(
        "resolve",
        parents=[*parents, journal],
        help="look up what is in doubt; --repost-in-doubt to post it again",
        description=(
            "Expire posting leases that ran out, look each extract in doubt up in the job "
            "list and adopt the job found. With --repost-in-doubt, an extract not found is "
            "posted again now, and a batch or crawl in doubt goes back to planned so that "
            "the next 'submit' of the run posts it again (no API lists batches or crawls: "
            "only you can tell it was not created)."
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
        help="the run journal's SQLite file (default as for submit)",
    )
    return parent


def _open(ctx: Context, args: argparse.Namespace) -> SqliteJournal:
    path = journal_path(args.journal, ctx.environ)
    if not path.is_file():
        # Reading must not create an empty journal where the user expected theirs.
        raise UsageError(f"no run journal at {path} (submit writes it; see --journal)")
    return SqliteJournal(path)


def _run(journal: SqliteJournal, name: str) -> Run:
    run = journal.run(name)
    if run is None:
        raise UsageError(f"no run named {name!r} in {journal.path} (runs list shows them)")
    return run


def summary(run: Run, entries: Sequence[Entry]) -> dict[str, Any]:
    """A run's URLs (and entries) by state, and whether it is complete."""
    urls = Counter[str]()
    for entry in entries:
        urls[entry.state.value] += len(entry.urls)
    record: dict[str, Any] = {"run": run.name, "mode": run.mode.value, "urls": run.urls}
    record.update({state.value: urls.get(state.value, 0) for state in SHOWN})
    record["complete"] = not any(e.state in OPEN for e in entries)
    record["entries"] = run.entries
    if run.mode is RunMode.BATCH:
        by_entry = Counter(e.state.value for e in entries)
        record["entries_by_state"] = {s.value: by_entry[s.value] for s in SHOWN if by_entry[s]}
    record["options"] = dict(run.options)
    record["created_at"] = run.created_at
    return record


def _url_rows(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    rows = []
    for entry in entries:
        state = "in doubt" if entry.state is S.IN_DOUBT else entry.state.value
        reason = entry.reason if entry.state in (S.REJECTED, S.IN_DOUBT) else None
        for url in entry.urls:
            row = {"entry": entry.index, "state": state, "job_id": entry.job_id, "url": url}
            rows.append({**row, "reason": reason})
    return rows


def _verdict(ctx: Context, run: Run, entries: Sequence[Entry]) -> int:
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
    if problems:
        raise FailedError(f"run {run.name} is not complete: {', '.join(problems)}")
    return 0


def run_list(ctx: Context, args: argparse.Namespace) -> int:
    """Every run in the journal, oldest first."""
    journal = _open(ctx, args)
    try:
        rows = [summary(run, journal.entries(run.name)) for run in journal.runs()]
    finally:
        journal.close()
    if not rows:
        ctx.out.note("no runs")
    else:
        ctx.out.table(rows, LIST_COLUMNS)
    return 0


def run_show(ctx: Context, args: argparse.Namespace) -> int:
    """One run by state (and by URL with ``--urls``); exit 1 while it is not complete."""
    journal = _open(ctx, args)
    try:
        run = _run(journal, args.name)
        entries = journal.entries(run.name)
    finally:
        journal.close()
    if args.urls:
        ctx.out.table(_url_rows(entries), URL_COLUMNS)
    else:
        ctx.out.record(summary(run, entries), title=f"run {run.name}")
    return _verdict(ctx, run, entries)


def run_resolve(ctx: Context, args: argparse.Namespace) -> int:
    """Resolve what the lookups can; with ``--repost-in-doubt``, post the rest again."""
    journal = _open(ctx, args)
    try:
        run = _run(journal, args.name)
        # A batch or crawl recorded but not announced (a crash between the two) is announced.
        announce = announcer(ctx) if run.mode is not RunMode.ASYNC else None
        submitter = Submitter(journal, ctx.client(), clock=ctx.clock, announce=announce)
        entries = submitter.settle(run, post_unfound=args.repost_in_doubt)
        if args.repost_in_doubt and run.mode is not RunMode.ASYNC:
            entries = _repost(ctx, journal, run, entries)
    finally:
        journal.close()
    ctx.out.record(summary(run, entries), title=f"run {run.name}")
    return _verdict(ctx, run, entries)


def _repost(
    ctx: Context, journal: SqliteJournal, run: Run, entries: Sequence[Entry]
) -> list[Entry]:
    """Each batch or crawl in doubt back to planned, named on stderr; the entries after."""
    for entry in entries:
        if entry.state is not S.IN_DOUBT:
            continue
        try:
            journal.repost(run, entry, ctx.clock.time())
        except MoveRefusedError:
            continue  # another operator moved it first
        ctx.out.notice(f"planned again: {entry.label()} (the next submit of the run posts it)")
    return journal.entries(run.name)


__all__: Sequence[str] = ("add_parser", "run_list", "run_resolve", "run_show", "summary")
