"""``poll``: follow many jobs (extracts, or a run's batches or crawls) and write each result once.

    ids (arguments, a file, or stdin: plain ids or submit's JSON lines)
      -> created time: submit's ``submitted_at`` when given, else one GET (which may find
         the job settled already: that GET is then its only fetch)
      -> ManyJobsPoller.run(max_wait): list pages of the window, one GET per settled job
      -> <out>/<job_id>/content.md | content.html | links.json | metadata.json
         or s3://bucket[/prefix] through ResultStore (the pipeline's own keys and
         If-None-Match: a job the pipeline stored already is not written again)

Ids are checked before anything is sent: a job id is a UUID (the simulator's and every example
in Geonode's documentation; the contract does not publish a format, so ``--any-id-format``
accepts any opaque token). An id the API still answers 404 for ``--not-found-grace`` seconds
after its creation (default 60; the API's 404 after a submission is replica lag, seconds) is
reported unknown at once, not waited for. Exit 1 when jobs are unknown or still unsettled at
the deadline; they are listed.

``--run NAME`` follows the job ids a run's journal recorded: an async run's extract jobs with
the many-jobs poller, a batch or crawl run's jobs with the paged poller (``GET /v1/batch/{id}``
or ``/v1/crawl/{id}``, 50 items a page, once settled), each item written once under
``<out>/<job_id>/<item>/`` (or the pipeline's keys under s3://) and printed as one line. Where
the journal is a file (no stack, or ``--journal``), each job's end (a batch's or crawl's with
each item's) is kept in it (``job_outcomes``) for ``runs show`` to join; with a stack the
ledger says it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrape_pipeline.geonode.errors import NotFoundError
from scrape_pipeline.geonode.fields import parse_time
from scrape_pipeline.geonode.models import Job
from scrape_pipeline.jobs import JobKind
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.job_outcomes import FileOutcomes
from scrape_pipeline_ops.cli.poll_targets import Target, open_target
from scrape_pipeline_ops.polling import JobTimeoutError

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline.geonode.client import GeonodeClient
    from scrape_pipeline_ops.cli.config import Context
    from scrape_pipeline_ops.paged_poller import PagedJob

COLUMNS = ("job_id", "status", "url", "written")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
DEFAULT_NOT_FOUND_GRACE = 60.0
_PREFETCH_CONCURRENCY = 4


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``poll``."""
    p = commands.add_parser(
        "poll",
        parents=parents,
        help="wait for async extract jobs (or a run's batches, crawls), write each result once",
        description=(
            "Follow async extract jobs with the many-jobs poller (its cost grows with list "
            "pages, not jobs x polls) and write each settled job once: "
            "<out>/<job_id>/content.md, content.html, metadata.json, or to S3 with the "
            "pipeline's own keys when --out is s3://bucket[/prefix]. Ids come from the "
            "arguments and --from (plain ids, or the JSON lines of 'submit --json'). "
            "With --run, the jobs of that run: a batch or crawl run's are read page by page "
            "once settled, each item written once (<out>/<job_id>/<item>/), one line each. "
            "Exits 1 listing the jobs not settled by --max-wait."
        ),
    )
    p.add_argument("ids", nargs="*", metavar="JOB_ID", help="extract job ids")
    p.add_argument(
        "--run",
        metavar="NAME",
        help="follow the jobs of this run (its journal: as for submit and runs)",
    )
    p.add_argument(
        "--journal",
        metavar="PATH",
        help="the run journal's SQLite file, even with a stack (default as for submit)",
    )
    p.add_argument(
        "--from", dest="from_file", metavar="FILE|-", help="read ids from a file, or - for stdin"
    )
    p.add_argument("--out", metavar="DIR|s3://BUCKET/PREFIX", help="where to write the results")
    p.add_argument(
        "--max-wait",
        type=float,
        default=3600.0,
        metavar="S",
        help="give up after this many seconds (default 3600)",
    )
    p.add_argument(
        "--not-found-grace",
        type=float,
        default=DEFAULT_NOT_FOUND_GRACE,
        metavar="S",
        help=(
            "report a job unknown once the API still answers 404 this long after its "
            f"creation (default {DEFAULT_NOT_FOUND_GRACE:.0f}: the API's replica lag is seconds)"
        ),
    )
    p.add_argument(
        "--any-id-format",
        action="store_true",
        help="accept job ids that are not UUIDs (any token of letters, digits, ._:-)",
    )
    p.set_defaults(handler=run)


# -- input ---------------------------------------------------------------------------------


def read_lines(source: str) -> list[str]:
    """The lines of a file or of stdin (``-``), without blanks and ``#`` comments."""
    import sys  # noqa: PLC0415 - looked up now: tests and pipes replace stdin

    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UsageError(f"cannot read {source}: {reason}") from exc
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _job_id(value: str, *, any_format: bool = False) -> str:
    if not _ID.fullmatch(value) or ".." in value:
        raise UsageError(f"not a job id: {value[:60]!r}")
    if not any_format and not _UUID.fullmatch(value):
        raise UsageError(f"not a job id (a UUID; --any-id-format accepts others): {value[:60]!r}")
    return value


def _hint(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    moment = parse_time(value)
    return moment.timestamp() if moment else None


def parse_ids(lines: Iterable[str], *, any_format: bool = False) -> dict[str, float | None]:
    """Job ids with their submission time when known (submit's JSON lines carry it)."""
    found: dict[str, float | None] = {}
    for line in lines:
        if not line.startswith("{"):
            found.setdefault(_job_id(line, any_format=any_format), None)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise UsageError(f"not a job id nor a JSON line: {line[:60]!r}") from None
        if not isinstance(record, Mapping) or not isinstance(record.get("job_id"), str):
            raise UsageError(f"a JSON line without a job_id: {line[:60]!r}")
        if record.get("kind", "extract") != "extract":
            raise UsageError(f"poll follows extract jobs; {record['job_id']} is a {record['kind']}")
        job_id = _job_id(record["job_id"], any_format=any_format)
        found.setdefault(job_id, _hint(record.get("submitted_at")))
    return found


# -- where results go ----------------------------------------------------------------------


# -- the poll --------------------------------------------------------------------------------


@dataclass
class _Prefetched:
    settled: list[Job] = field(default_factory=list)
    created: dict[str, float] = field(default_factory=dict)
    not_found: set[str] = field(default_factory=set)


def _prefetch(client: GeonodeClient, job_ids: list[str], now: float) -> _Prefetched:
    """One GET per job whose creation time is unknown: settled ones are done already."""

    def one(job_id: str) -> tuple[str, Job | None]:
        try:
            return job_id, client.get_job(job_id)
        except NotFoundError:
            return job_id, None  # just submitted (replica lag), or unknown: the poller decides

    found = _Prefetched()
    with ThreadPoolExecutor(_PREFETCH_CONCURRENCY) as pool:
        for job_id, job in pool.map(one, job_ids):
            if job is not None and job.is_terminal:
                found.settled.append(job)
                continue
            if job is None:
                found.not_found.add(job_id)
            found.created[job_id] = job.created_at.timestamp() if job and job.created_at else now
    return found


def _report(job: Job, written: str | None) -> dict[str, Any]:
    report: dict[str, Any] = {"job_id": job.job_id, "status": job.status, "url": job.url}
    if job.error is not None:
        report["error"] = job.error.code
    report["written"] = written
    return report


def poll_jobs(
    ctx: Context,
    ids: Mapping[str, float | None],
    max_wait: float,
    *,
    not_found_grace: float = DEFAULT_NOT_FOUND_GRACE,
    on_unknown: Callable[[str], None] | None = None,
) -> Iterator[Job]:
    """Every job of ``ids`` once as it settles; ``JobTimeoutError`` after ``max_wait``.

    A job the API does not know past ``not_found_grace`` is passed to ``on_unknown`` instead.
    """
    from scrape_pipeline_ops.many_poller import ManyJobsPoller, ManyJobsSettings  # noqa: PLC0415

    client = ctx.client()
    settings = ManyJobsSettings(not_found_grace=not_found_grace)
    poller = ManyJobsPoller(client, settings=settings, clock=ctx.clock)
    undated = [job_id for job_id, hint in ids.items() if hint is None]
    found = _prefetch(client, undated, ctx.clock.time()) if undated else _Prefetched()
    for job_id, hint in ids.items():
        if hint is not None:
            poller.track(job_id, created_at=hint)
        elif job_id in found.created:
            poller.track(
                job_id, created_at=found.created[job_id], not_found=job_id in found.not_found
            )
    yield from found.settled
    yield from poller.run(max_wait=max_wait, on_unknown=on_unknown)


@dataclass(frozen=True)
class _RunJobs:
    """The jobs a run's journal recorded: their kind, and each id with its POST's time."""

    kind: JobKind
    ids: dict[str, float | None]


def _run_jobs(ctx: Context, args: argparse.Namespace) -> _RunJobs:
    """The job ids a run's journal recorded, each with the time its POST was claimed."""
    from scrape_pipeline.runs.moves import EntryState  # noqa: PLC0415
    from scrape_pipeline_ops.cli.submit_run import open_journal  # noqa: PLC0415 - --run only

    opened = open_journal(ctx, args.journal, existing=True)
    try:
        run = opened.journal.run(args.run)
        if run is None:
            raise UsageError(f"no run named {args.run!r} in {opened.where} (runs list shows them)")
        entries = opened.journal.entries(run.name, [EntryState.SUBMITTED])
    finally:
        opened.close()
    return _RunJobs(JobKind(run.mode.kind), {e.job_id: e.posted_at for e in entries if e.job_id})


def _kept_outcomes(ctx: Context, args: argparse.Namespace) -> FileOutcomes | None:
    """Where the jobs' ends are kept for ``runs show``: the journal file, when that is the
    journal in use and it exists (with a stack, the ledger keeps them)."""
    from scrape_pipeline_ops.cli.submit_run import LEDGER_ENV, journal_path  # noqa: PLC0415

    if ctx.environ.get(LEDGER_ENV) and not args.journal:
        return None
    path = journal_path(args.journal, ctx.environ)
    return FileOutcomes(path) if path.is_file() else None


def run(ctx: Context, args: argparse.Namespace) -> int:
    lines = list(args.ids)
    if args.from_file:
        lines += read_lines(args.from_file)
    ids = parse_ids(lines, any_format=args.any_id_format)
    kind = JobKind.EXTRACT
    if args.run:
        jobs = _run_jobs(ctx, args)
        if jobs.kind is not JobKind.EXTRACT and ids:
            raise UsageError(
                f"run {args.run} is a {jobs.kind} run: poll its jobs alone, the extract "
                "ids in another poll"
            )
        kind = jobs.kind
        ids.update({k: v for k, v in jobs.ids.items() if k not in ids or v})
    if not ids:
        if args.run:
            ctx.out.note(f"run {args.run} has no submitted job to follow")
            return 0
        raise UsageError("no job ids: pass them as arguments or with --from FILE|-")
    if args.max_wait <= 0:
        raise UsageError("--max-wait must be positive")
    if args.not_found_grace < 0:
        raise UsageError("--not-found-grace cannot be negative")
    target = open_target(args.out, ctx)
    kept = _kept_outcomes(ctx, args)
    try:
        if kind is JobKind.EXTRACT:
            return _follow(ctx, args, ids, target, kept)
        return _follow_paged(ctx, args, _Paged(kind, ids, target, kept))
    finally:
        if kept is not None:
            kept.close()


def _follow(
    ctx: Context,
    args: argparse.Namespace,
    ids: dict[str, float | None],
    target: Target | None,
    kept: FileOutcomes | None,
) -> int:
    """Poll ``ids`` until settled or ``--max-wait``, writing and keeping each once."""
    done: set[str] = set()
    unknown: list[str] = []

    with ctx.out.progress(len(ids), "settled") as advance:

        def report_unknown(job_id: str) -> None:
            unknown.append(job_id)
            if kept is not None:
                kept.record_unknown(job_id, ctx.clock.time())
            ctx.out.row({"job_id": job_id, "status": "unknown", "written": None}, COLUMNS)
            advance()

        try:
            for job in poll_jobs(
                ctx,
                ids,
                args.max_wait,
                not_found_grace=args.not_found_grace,
                on_unknown=report_unknown,
            ):
                written = target.write(job) if target is not None else None
                if kept is not None:
                    kept.record(job, written, ctx.clock.time())
                done.add(job.job_id)
                ctx.out.row(_report(job, written), COLUMNS)
                advance()
        except JobTimeoutError as exc:
            _timed_out(ctx, args, ids, unknown, seen=done | set(unknown), exc=exc)
    return _unknown_verdict(args, ids, unknown)


@dataclass(frozen=True)
class _Paged:
    """A batch or crawl run's jobs to follow, and where their ends go."""

    kind: JobKind
    ids: dict[str, float | None]
    target: Target | None
    kept: FileOutcomes | None


def _follow_paged(ctx: Context, args: argparse.Namespace, paged: _Paged) -> int:
    """Follow a run's batches or crawls until settled or ``--max-wait``: every item written
    once and printed as a line, each job kept with its items once."""
    from scrape_pipeline_ops.many_poller import ManyJobsSettings  # noqa: PLC0415
    from scrape_pipeline_ops.paged_poller import PagedJobsPoller  # noqa: PLC0415

    settings = ManyJobsSettings(not_found_grace=args.not_found_grace)
    poller = PagedJobsPoller(ctx.client(), settings=settings, clock=ctx.clock)
    for job_id, posted_at in paged.ids.items():
        poller.track(paged.kind, job_id, created_at=posted_at)
    done: set[str] = set()
    unknown: list[str] = []
    with ctx.out.progress(len(paged.ids), "settled") as advance:

        def report_unknown(job_id: str) -> None:
            unknown.append(job_id)
            if paged.kept is not None:
                paged.kept.record_unknown(job_id, ctx.clock.time())
            ctx.out.row({"job_id": job_id, "status": "unknown", "written": None}, COLUMNS)
            advance()

        try:
            for job in poller.run(max_wait=args.max_wait, on_unknown=report_unknown):
                _write_paged(ctx, paged, job)
                done.add(job.job_id)
                advance()
        except JobTimeoutError as exc:
            _timed_out(ctx, args, paged.ids, unknown, seen=done | set(unknown), exc=exc)
    return _unknown_verdict(args, paged.ids, unknown)


def _write_paged(ctx: Context, paged: _Paged, job: PagedJob) -> None:
    """Write each item of a settled batch or crawl, print it, and keep the job."""
    target = paged.target
    written: list[str | None] = []
    for index, item in job.numbered():
        where = target.write_item(job.kind, job.job_id, index, item) if target else None
        written.append(where)
        report: dict[str, Any] = {"job_id": job.job_id, "item": index, "status": item.status}
        report["url"] = item.url
        if item.error_code is not None:
            report["error"] = item.error_code
        ctx.out.row({**report, "written": where}, COLUMNS)
    if paged.kept is not None:
        folder = target.where(job.kind, job.job_id) if target and job.items else None
        paged.kept.record_paged(job, folder, written, ctx.clock.time())


def _timed_out(
    ctx: Context,
    args: argparse.Namespace,
    ids: Mapping[str, float | None],
    unknown: list[str],
    *,
    seen: set[str],
    exc: JobTimeoutError,
) -> None:
    """List the jobs not settled by ``--max-wait`` and fail naming them."""
    pending = [job_id for job_id in ids if job_id not in seen]
    for job_id in pending:
        ctx.out.row({"job_id": job_id, "status": "unsettled", "written": None}, COLUMNS)
    raise FailedError(
        f"{len(pending)} of {len(ids)} job(s) not settled after {exc.waited:.0f}s: "
        f"{_shown(pending)}{_unknown_note(unknown, args.not_found_grace)}"
    ) from exc


def _unknown_verdict(
    args: argparse.Namespace, ids: Mapping[str, float | None], unknown: list[str]
) -> int:
    """0, or a failure naming the jobs the API did not know."""
    if unknown:
        raise FailedError(
            f"{len(unknown)} of {len(ids)} job(s) unknown to the API (404 "
            f"{args.not_found_grace:.0f}s after creation): {_shown(unknown)}"
        )
    return 0


def _shown(job_ids: list[str]) -> str:
    return ", ".join(job_ids[:10]) + (" ..." if len(job_ids) > 10 else "")


def _unknown_note(unknown: list[str], grace: float) -> str:
    if not unknown:
        return ""
    return f"; {len(unknown)} unknown to the API (404 after {grace:.0f}s): {_shown(unknown)}"
