"""``submit``: send URLs as sync extracts, or as a run of async jobs, batches or crawls.

async, batch and crawl submissions are runs (``submit_run``): every URL has a journal entry,
so running the same command again after a crash, a kill or a failure posts only what was
not submitted. sync waits for each result and keeps no journal (there is no job to lose).

One line is printed per job as soon as the API accepted it, so a run cut short still says
what was submitted. ``submit --json | poll --from -`` follows the async jobs it started
(each line carries ``submitted_at``, which saves the poller one GET per job).
A URL the API rejects (422) is reported and the rest go on; the run then exits 1.

Batches and crawls are announced to the ledger when it is configured (LEDGER_TABLE_NAME or
--stack-name): no API lists them, so without the announcement a batch whose webhook is lost
would be lost for good (``scrape_pipeline_ops.submissions``). With a stack the journal is in
the ledger table and the announcement is part of the write of the job id (``submit_run``).
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from scrape_pipeline.geonode.errors import ValidationError
from scrape_pipeline.runs.plan import BATCH_MAX_URLS, FORMATS, is_url
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.poll import read_lines
from scrape_pipeline_ops.cli.poll_targets import LocalTarget
from scrape_pipeline_ops.cli.submit_run import run_submission

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

MODES = ("sync", "async", "batch", "crawl")
SYNC_COLUMNS = ("url", "status", "http_status", "tokens_charged", "written")


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``submit``."""
    p = commands.add_parser(
        "submit",
        parents=parents,
        help="submit URLs (one per line) as sync, async, batch or crawl jobs",
        description=(
            "Submit the URLs of FILE (or stdin: -), one per line; blank lines and #comments "
            "are skipped, a URL listed twice is posted once. async and crawl make one job per "
            "URL, batch one job per --batch-size URLs; sync waits for each result and prints "
            "its metadata (with --out DIR, the content is written there). Prints one line per "
            "job: job_id, status, url. async, batch and crawl submissions are runs: each URL "
            "has an entry in a journal: with a stack (--stack-name or LEDGER_TABLE_NAME) in "
            "the ledger table, else (or with --journal) a file ($SCRAPE_PIPELINE_JOURNAL, else "
            "$XDG_STATE_HOME/scrape-pipeline/runs.sqlite3, ~/.local/state without "
            "XDG_STATE_HOME); the first stderr line names it, and the same command run again "
            "posts only what was not submitted. A POST whose answer was lost is 'in doubt': "
            "an extract is looked up in the job list and adopted, a batch or crawl is "
            "reported, never posted twice; "
            "the command exits 1 while anything is in doubt. With LEDGER_TABLE_NAME (or "
            "--stack-name), batches and crawls are announced to the ledger (with the stack's "
            "journal, in the same write as their job id), so the pipeline finds them even if "
            "their webhook is lost."
        ),
    )
    p.add_argument("file", nargs="?", default="-", metavar="FILE|-", help="URL list (default -)")
    p.add_argument("--mode", choices=MODES, default="async", help="default async")
    p.add_argument(
        "--formats",
        default="markdown",
        metavar="LIST",
        help=f"comma-separated, of {', '.join(FORMATS)} (default markdown)",
    )
    p.add_argument("--render-js", action="store_true", help="render JavaScript first")
    p.add_argument("--max-pages", type=int, metavar="N", help="crawl only: pages per crawl")
    p.add_argument("--out", metavar="DIR", help="sync only: write each result under DIR")
    p.add_argument(
        "--run",
        metavar="NAME",
        help="the run's name (default: derived from the URLs, mode and options)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=BATCH_MAX_URLS,
        metavar="N",
        help=f"batch only: URLs per batch job, 1..{BATCH_MAX_URLS} (default {BATCH_MAX_URLS})",
    )
    p.add_argument(
        "--journal",
        metavar="PATH",
        help="use the SQLite journal file at PATH, even with a stack (default without one: "
        "$SCRAPE_PIPELINE_JOURNAL, else $XDG_STATE_HOME/scrape-pipeline/runs.sqlite3)",
    )
    p.set_defaults(handler=run)


def parse_formats(value: str) -> tuple[str, ...]:
    """``markdown,html`` as a tuple; ``UsageError`` on an unknown or empty list."""
    formats = tuple(dict.fromkeys(f.strip() for f in value.split(",") if f.strip()))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UsageError(f"--formats takes {', '.join(FORMATS)}; got {value!r}")
    return formats


def read_urls(source: str) -> list[str]:
    """The URLs of a file or stdin; ``UsageError`` when one is not an http(s) URL."""
    urls = read_lines(source)
    for url in urls:
        if not is_url(url):
            raise UsageError(f"not an http(s) URL: {url[:80]!r}")
    if not urls:
        raise UsageError(f"no URLs in {'stdin' if source == '-' else source}")
    return urls


def sync_folder_name(url: str) -> str:
    """A folder name for a sync result (sync results have no job id): readable and unique."""
    readable = re.sub(r"[^A-Za-z0-9.-]+", "_", url.split("://", 1)[-1]).strip("_.")[:60]
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return f"sync-{readable}-{digest}"


def _check(args: argparse.Namespace) -> None:
    if args.max_pages is not None and args.mode != "crawl":
        raise UsageError("--max-pages applies to --mode crawl")
    if args.max_pages is not None and args.max_pages < 1:
        raise UsageError("--max-pages must be at least 1")
    if args.out and args.mode != "sync":
        raise UsageError("--out applies to --mode sync (use 'poll --out' for async jobs)")
    _check_run(args)


def _check_run(args: argparse.Namespace) -> None:
    """The options of a run (async, batch, crawl) are not given to another mode."""
    if args.batch_size != BATCH_MAX_URLS and args.mode != "batch":
        raise UsageError("--batch-size applies to --mode batch")
    if args.mode == "sync" and (args.run or args.journal):
        raise UsageError("--run and --journal apply to async, batch and crawl runs")


def run(ctx: Context, args: argparse.Namespace) -> int:
    _check(args)
    formats = parse_formats(args.formats)
    urls = read_urls(args.file)
    if args.mode != "sync":
        return run_submission(ctx, args, urls, formats)
    client = ctx.client()
    options: dict[str, Any] = {"formats": formats, "render_js": args.render_js}
    rejected = 0
    target = LocalTarget(args.out) if args.out else None
    for url in urls:
        try:
            result = client.extract_sync(url, **options)
        except ValidationError as exc:
            # This URL was refused, or its extraction failed: the others go on.
            rejected += 1
            ctx.out.row({"url": url, "status": "rejected", "error": exc.code}, ("url", "status"))
            continue
        metadata = {k: v for k, v in result.raw.items() if k != "data"}
        written = (
            target.write_files(sync_folder_name(url), result.data, metadata)
            if target is not None
            else None
        )
        report = {
            "url": url,
            "status": "completed",
            "http_status": result.metadata.get("http_status"),
            "tokens_charged": result.tokens_charged,
            "metadata": result.metadata,
            "written": written,
        }
        ctx.out.row(report, SYNC_COLUMNS)
    if rejected:
        raise FailedError(f"{rejected} of {len(urls)} URL(s) rejected by the API")
    return 0
