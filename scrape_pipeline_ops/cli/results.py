"""``results get JOB_ID|URL [--out DIR]``: where a job's result is, or its objects in DIR.

A URL is resolved through the runs journal (the job it was submitted as), else the API's job
list by ``url`` (newest first), and taken only when the stored ``metadata.json`` names it.
Exit 1 when nothing stored is found (a dead-lettered job is named with its record), 2 for an
argument that is neither a job id nor an http(s) URL.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.runs.plan import is_url
from scrape_pipeline_ops import locate
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.submit_run import open_journal

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context
    from scrape_pipeline_ops.locate import Candidate, Located

_JOB_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
COLUMNS: Final = ("job_id", "kind", "item", "bucket", "prefix", "size")


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``results get``."""
    p = commands.add_parser("results", parents=parents, help="find a job's stored result")
    sub = p.add_subparsers(dest="results_command", metavar="COMMAND", required=True)
    get = sub.add_parser(
        "get",
        parents=parents,
        help="where a job's (or URL's) result is in RESULTS_BUCKET; --out writes it",
        description=(
            "Print the bucket, keys and size of a job's stored result (a batch's or crawl's: "
            "one line per item), or with --out write its objects into DIR as stored. A URL "
            "is looked up in the runs journal, then in the API's job list."
        ),
    )
    get.add_argument("target", metavar="JOB_ID|URL")
    get.add_argument("--out", metavar="DIR", help="write the objects into DIR")
    get.add_argument(
        "--journal", metavar="PATH", help="the runs journal file (default as for submit)"
    )
    get.set_defaults(handler=run_get)


def _journal_candidates(ctx: Context, args: argparse.Namespace, url: str) -> list[Candidate]:
    try:
        opened = open_journal(ctx, args.journal, existing=True)
    except UsageError:
        if args.journal:
            raise
        return []  # no journal: the API's job list alone
    try:
        return locate.journal_candidates(opened.journal, url)
    finally:
        opened.close()


def _find(ctx: Context, args: argparse.Namespace, bucket: str) -> list[Located]:
    s3 = ctx.aws("s3")
    target: str = args.target
    if is_url(target):
        found = locate.by_url(s3, bucket, target, _journal_candidates(ctx, args, target))
        if not found:
            found = locate.by_url(s3, bucket, target, locate.api_candidates(ctx.client(), target))
        if not found:
            raise FailedError(
                f"no stored result for {target} (looked in the runs journal and the job list)"
            )
        return found
    if not _JOB_ID.fullmatch(target):
        raise UsageError(f"not a job id nor an http(s) URL: {target[:60]!r}")
    found = locate.by_id(s3, bucket, target)
    if not found:
        letters = locate.dead_letters(s3, bucket, target)
        if letters:
            where = ", ".join(f"s3://{bucket}/{key}" for key in letters[:3])
            raise FailedError(f"job {target} has no result: dead-lettered ({where})")
        raise FailedError(f"no result for job {target} in s3://{bucket}")
    return found


def run_get(ctx: Context, args: argparse.Namespace) -> int:
    """Print where the result is, or write it into ``--out``."""
    bucket = ctx.require("RESULTS_BUCKET")["RESULTS_BUCKET"]
    found = _find(ctx, args, bucket)
    rows = [located.record() for located in found]
    if args.out:
        out = Path(args.out)
        for row, located in zip(rows, found, strict=True):
            row["written"] = [str(p) for p in locate.write(ctx.aws("s3"), located, out)]
    if len(rows) == 1:
        ctx.out.record(rows[0], title=f"result of {args.target}")
    else:
        ctx.out.table(rows, COLUMNS, title=f"results of {args.target}")
    return 0
