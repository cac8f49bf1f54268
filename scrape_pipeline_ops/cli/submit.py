"""``submit``: send URLs as sync extracts, async jobs, one batch, or crawls.

One line is printed per job as soon as the API accepted it, so a run cut short still says
what was submitted. ``submit --json | poll --from -`` follows the async jobs it started
(each line carries ``submitted_at``, which saves the poller one GET per job).
A URL the API rejects (422) is reported and the rest go on; the run then exits 1.

Batches and crawls are announced to the ledger when it is configured (LEDGER_TABLE_NAME or
--stack-name): no API lists them, so without the announcement a batch whose webhook is lost
would be lost for good (``scrape_pipeline_ops.submissions``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import ValidationError
from scrape_pipeline.geonode.models import format_time
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.poll import LocalTarget, read_lines

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

MODES = ("sync", "async", "batch", "crawl")
LEDGER_ENV = "LEDGER_TABLE_NAME"
FORMATS = ("markdown", "html", "links")
BATCH_MAX_URLS = 1000
COLUMNS = ("job_id", "kind", "status", "url")
SYNC_COLUMNS = ("url", "status", "http_status", "tokens_charged", "written")


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``submit``."""
    p = commands.add_parser(
        "submit",
        parents=parents,
        help="submit URLs (one per line) as sync, async, batch or crawl jobs",
        description=(
            "Submit the URLs of FILE (or stdin: -), one per line; blank lines and #comments "
            "are skipped. async and crawl make one job per URL, batch one job for all (up to "
            "1,000), sync waits for each result and prints its metadata (with --out DIR, the "
            "content is written there). Prints one line per job: job_id, status, url. With "
            "LEDGER_TABLE_NAME (or --stack-name), batches and crawls are announced to the "
            "ledger, so the pipeline finds them even if their webhook is lost."
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
        if not re.match(r"https?://\S+$", url):
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


def _announcer(ctx: Context) -> Callable[[str, str], bool]:
    """``announce(kind, job_id)``: record a batch or crawl in the ledger, when there is one."""
    table = ctx.environ.get(LEDGER_ENV)
    if not table:
        return lambda kind, job_id: False
    from scrape_pipeline.jobs import JobKind  # noqa: PLC0415
    from scrape_pipeline.ledger import DEFAULT_TTL_DAYS, Ledger  # noqa: PLC0415
    from scrape_pipeline_ops.submissions import expect  # noqa: PLC0415

    ttl_days = int(ctx.environ.get("LEDGER_TTL_DAYS") or DEFAULT_TTL_DAYS)
    ledger = Ledger(table, client=ctx.aws("dynamodb"), ttl_days=ttl_days, clock=ctx.clock)

    def announce(kind: str, job_id: str) -> bool:
        try:
            expect(ledger, JobKind(kind), job_id)
        except AWSUnavailableError as exc:
            raise FailedError(
                f"{kind} {job_id} was submitted but not announced to the ledger ({exc.code}); "
                "the reconciler cannot find it if its webhook is lost"
            ) from exc
        return True

    return announce


def run(ctx: Context, args: argparse.Namespace) -> int:
    _check(args)
    formats = parse_formats(args.formats)
    urls = read_urls(args.file)
    if args.mode == "batch" and len(urls) > BATCH_MAX_URLS:
        raise UsageError(f"a batch takes at most {BATCH_MAX_URLS} URLs, got {len(urls)}")
    client = ctx.client()
    options: dict[str, Any] = {"formats": formats, "render_js": args.render_js}

    # Only batches and crawls: the reconciler finds extract jobs in the API's job list.
    announce = _announcer(ctx) if args.mode in ("batch", "crawl") else None
    if args.mode == "batch":
        submitted_at = format_time(ctx.clock.time())
        job = client.create_batch(urls, **options)
        ctx.out.row(
            {
                "job_id": job.job_id,
                "kind": "batch",
                "status": job.status,
                "url": None,
                "urls": len(urls),
                "submitted_at": submitted_at,
                "announced": announce is not None and announce("batch", job.job_id),
            },
            COLUMNS,
        )
        return 0

    rejected = 0
    target = LocalTarget(args.out) if args.out else None
    for url in urls:
        submitted_at = format_time(ctx.clock.time())
        try:
            if args.mode == "sync":
                result = client.extract_sync(url, **options)
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
                continue
            if args.mode == "crawl":
                if args.max_pages is not None:
                    options["max_pages"] = args.max_pages
                job = client.create_crawl(url, **options)
            else:
                job = client.submit_extract(url, **options)
        except ValidationError as exc:
            # This URL was refused (or, in sync mode, its extraction failed): the others go on.
            rejected += 1
            ctx.out.row({"url": url, "status": "rejected", "error": exc.code}, ("url", "status"))
            continue
        kind = "crawl" if args.mode == "crawl" else "extract"
        line: dict[str, Any] = {
            "job_id": job.job_id,
            "kind": kind,
            "status": job.status,
            "url": url,
            "submitted_at": submitted_at,
        }
        if announce is not None:
            line["announced"] = announce(kind, job.job_id)
        ctx.out.row(line, COLUMNS)
    if rejected:
        raise FailedError(f"{rejected} of {len(urls)} URL(s) rejected by the API")
    return 0
