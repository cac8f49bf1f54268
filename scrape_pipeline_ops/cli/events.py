"""``events tail``: follow the stack's bus, each outcome's event as one JSON line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrape_pipeline_ops.cli.config import UsageError
from scrape_pipeline_ops.cli.output import to_json

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

BUS = "EVENT_BUS_NAME"
EXIT_INTERRUPTED = 130


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``events tail``."""
    group = commands.add_parser(
        "events",
        parents=parents,
        help="follow the outcome events on the stack's bus",
        description="The stack's EventBridge bus (EVENT_BUS_NAME, or --stack-name).",
    )
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "tail",
        parents=parents,
        help="print each event as a JSON line until Ctrl-C",
        description=(
            "Create a temporary rule on the bus with an SQS queue as its target, print each "
            "event it delivers as one JSON line, and remove the rule and the queue on exit "
            "(Ctrl-C included). Events put before the rule exists are not seen."
        ),
    )
    p.add_argument("--max-events", type=int, metavar="N", help="stop after N events")
    p.add_argument(
        "--wait",
        type=int,
        default=20,
        metavar="SECONDS",
        help="long-poll wait per receive, 0-20 (default 20)",
    )
    p.set_defaults(handler=tail)


def tail(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline_ops.events_tail import BusTail  # noqa: PLC0415

    if args.max_events is not None and args.max_events < 1:
        raise UsageError("--max-events must be at least 1")
    if not 0 <= args.wait <= 20:
        raise UsageError("--wait must be from 0 to 20 seconds")
    bus = ctx.require(BUS)[BUS]
    seen = 0
    try:
        with BusTail(
            bus, events=ctx.aws("events"), sqs=ctx.aws("sqs"), wait_seconds=args.wait
        ) as t:
            for event in t.events():
                ctx.out.stdout.write(to_json(event) + "\n")
                ctx.out.stdout.flush()
                seen += 1
                if args.max_events is not None and seen >= args.max_events:
                    return 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # the rule and the queue are gone already (BusTail's exit)
    return 0
