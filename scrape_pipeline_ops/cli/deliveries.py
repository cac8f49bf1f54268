"""``deliveries``: read a subscription's delivery log, and replay the jobs of failed deliveries.

Geonode publishes no redelivery endpoint, so "replay" means what the reconciler does with
the log: every job whose delivery failed since a moment is made sure of in the ledger and
enqueued unless already done (``scrape_pipeline_ops.replay``); the processor does the rest.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from scrape_pipeline.geonode.fields import format_time, parse_time
from scrape_pipeline.geonode.webhooks import Delivery
from scrape_pipeline.jobs import Source
from scrape_pipeline_ops.cli.config import UsageError

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

COLUMNS = ("id", "job_id", "event_type", "attempt", "status", "http_status", "created_at")
DELIVERY_STATUSES = ("pending", "success", "failed", "abandoned")
DEFAULT_SINCE_MINUTES = 60.0


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``deliveries`` and its subcommands."""
    group = commands.add_parser(
        "deliveries",
        parents=parents,
        help="read the delivery log; replay failed deliveries",
        description="A subscription's delivery attempts, as Geonode logs them.",
    )
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser(
        "list",
        parents=parents,
        help="list delivery attempts, newest first",
        description="List a subscription's delivery attempts, newest first.",
    )
    p.add_argument("webhook_id", metavar="WEBHOOK_ID")
    p.add_argument("--status", choices=DELIVERY_STATUSES, help="only attempts in this status")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N (default 50)")
    p.set_defaults(handler=list_deliveries)

    p = sub.add_parser(
        "replay",
        parents=parents,
        help="enqueue the jobs of failed deliveries",
        description=(
            "Enqueue the job of every delivery that failed since --since (default: the last "
            f"{DEFAULT_SINCE_MINUTES:.0f} minutes), unless the ledger shows it done. Needs "
            "LEDGER_TABLE_NAME and QUEUE_URL (or --stack-name). Prints how many were enqueued."
        ),
    )
    p.add_argument("webhook_id", metavar="WEBHOOK_ID")
    since = p.add_mutually_exclusive_group()
    since.add_argument("--since", metavar="ISO", help="e.g. 2026-01-31T12:00:00Z")
    since.add_argument("--since-minutes", type=float, metavar="M")
    p.add_argument(
        "--status-code", type=int, metavar="CODE", help="only deliveries answered with CODE"
    )
    p.set_defaults(handler=replay)


def delivery_record(delivery: Delivery) -> dict[str, Any]:
    """One attempt as printed."""
    return {
        "id": delivery.id,
        "job_id": delivery.job_id,
        "event_type": delivery.event_type,
        "attempt": delivery.attempt_number,
        "status": delivery.status,
        "http_status": delivery.http_status,
        "created_at": format_time(delivery.created_at) if delivery.created_at else None,
        "delivered_at": format_time(delivery.delivered_at) if delivery.delivered_at else None,
    }


def list_deliveries(ctx: Context, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    attempts = ctx.client().iter_deliveries(args.webhook_id, status=args.status)
    rows = [delivery_record(d) for d in itertools.islice(attempts, args.limit)]
    ctx.out.table(rows, COLUMNS, title=f"deliveries of {args.webhook_id}")
    return 0


def since_time(args: argparse.Namespace, now: float) -> float:
    """The moment ``--since`` / ``--since-minutes`` name, as epoch seconds."""
    if args.since:
        moment = parse_time(args.since)
        if moment is None:
            raise UsageError(f"--since takes an ISO 8601 time, got {args.since!r}")
        return moment.timestamp()
    minutes = DEFAULT_SINCE_MINUTES if args.since_minutes is None else args.since_minutes
    if minutes <= 0:
        raise UsageError("--since-minutes must be positive")
    return now - minutes * 60.0


def replay(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline.wiring.reconciler import build_reconciler  # noqa: PLC0415
    from scrape_pipeline_ops.replay import replay_failed  # noqa: PLC0415

    since = since_time(args, ctx.clock.time())
    reconciler = build_reconciler(ctx.wiring_env("LEDGER_TABLE_NAME", "QUEUE_URL"), clock=ctx.clock)
    result = replay_failed(
        reconciler,
        args.webhook_id,
        since=since,
        only_status=args.status_code,
        source=Source.CLI_REPLAY,
    )
    ctx.out.record(
        {
            "webhook_id": args.webhook_id,
            "since": format_time(since),
            "status_code": args.status_code,
            "enqueued": result.recovered,
            "delivery_pages": result.delivery_pages,
            "complete": result.complete,
        }
    )
    return 0
