"""``reconcile``, ``status`` and ``dlq``: the pipeline's state and its repairs, run by hand.

reconcile      one reconciler run now (the same code as the scheduled Lambda)
status         ledger rows by state and outcome, batches' and crawls' items, queue and DLQ
               depth, the watermark
dlq inspect    read dead letters without consuming them (visible again when done)
dlq redrive    move dead letters back to the job queue: send, then delete
               (moto has no StartMessageMoveTask; a copy sent twice is harmless: the
               ledger makes the second one a no-op)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline_ops.cli.config import UsageError

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context
    from scrape_pipeline_ops.ledger import Ledger

LEDGER = "LEDGER_TABLE_NAME"
QUEUE = "QUEUE_URL"
DLQ = "DLQ_URL"
DLQ_COLUMNS = ("message_id", "receive_count", "sent_at", "body")
# A batch's or crawl's items, in the order status shows them.
_ITEMS = ("stored", "retrying", "dead_lettered", "cancelled")
_INSPECT_VISIBILITY = 30  # a safety net only: inspected messages are made visible at once
_REDRIVE_VISIBILITY = 60
_DEPTH = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


def add_parsers(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``reconcile``, ``status``, ``dlq``."""
    p = commands.add_parser(
        "reconcile",
        parents=parents,
        help="run one reconciliation now and print its report",
        description=(
            "Run the reconciler once, now: stuck ledger rows, failed deliveries, settled jobs "
            "the webhooks missed; each found job is enqueued. Needs LEDGER_TABLE_NAME and "
            "QUEUE_URL (or --stack-name)."
        ),
    )
    p.set_defaults(handler=reconcile)

    p = commands.add_parser(
        "status",
        parents=parents,
        help="ledger rows by state and outcome, queue depths, reconciler watermark",
        description=(
            "Count the ledger's job rows by state and by outcome (a paginated Scan projecting "
            "only state, outcome and item counts: fine for an operator tool, it reads the whole "
            "table), the batches' and crawls' items (stored, retrying, dead-lettered, cancelled; "
            "a batch is stored only when every item is, else 'stored with N dead-lettered' or "
            "'retrying N'), the job queue's and the DLQ's depth, and the reconciler's watermark. "
            "Needs "
            "LEDGER_TABLE_NAME and QUEUE_URL; DLQ_URL defaults to the queue's redrive target."
        ),
    )
    p.set_defaults(handler=status)

    group = commands.add_parser(
        "dlq",
        parents=parents,
        help="inspect or redrive the dead-letter queue",
        description="The job queue's dead-letter queue (DLQ_URL, or the queue's redrive target).",
    )
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "inspect",
        parents=parents,
        help="print dead letters without deleting them",
        description=(
            "Print up to N dead letters with their receive counts (this read counts as one "
            "receive); nothing is deleted and the messages are visible again right after."
        ),
    )
    p.add_argument("--limit", type=int, default=10, metavar="N", help="default 10")
    p.set_defaults(handler=dlq_inspect)
    p = sub.add_parser(
        "redrive",
        parents=parents,
        help="move dead letters back to the job queue",
        description=(
            "Send each dead letter to the job queue, then delete it from the DLQ "
            "(at most N; default: the messages in the DLQ when the command starts)."
        ),
    )
    p.add_argument("--limit", type=int, metavar="N")
    p.set_defaults(handler=dlq_redrive)


# -- reconcile -----------------------------------------------------------------------------


def reconcile(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline.wiring.reconciler import build_reconciler  # noqa: PLC0415

    reconciler = build_reconciler(ctx.wiring_env(LEDGER, QUEUE), clock=ctx.clock)
    report = reconciler.run(full=True)  # by hand: every sweep, whatever the cadence
    # The handler's summary, the watermark shown as a time (the API's clock).
    summary = report.summary()
    summary["watermark"] = format_time(report.watermark) if report.watermark else None
    ctx.out.record(summary, title="reconciliation")
    # The other sweeps ran; a failed one is still an API or AWS failure for the operator.
    return 1 if report.errors else 0


# -- status --------------------------------------------------------------------------------


def ledger_counts(ledger: Ledger) -> dict[str, Any]:
    """Job rows by state and by outcome (bookkeeping rows skipped), and the batches' and
    crawls' items, from one paginated Scan."""
    counts = ledger.count_rows(with_items=True)
    items = counts.items
    assert items is not None  # asked for
    return {
        "jobs": counts.jobs,
        "by_state": counts.by_state,
        "by_outcome": counts.by_outcome,
        "items": {name: items.items[name] for name in _ITEMS},
        "batches_and_crawls": dict(sorted(items.jobs.items())),
        "not_simply_stored": items.named,
    }


def queue_depth(sqs: Any, url: str) -> dict[str, int]:
    """Visible, in-flight and delayed messages (SQS's approximations)."""
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_DEPTH))["Attributes"]
    return {
        "visible": int(attrs.get(_DEPTH[0], 0)),
        "in_flight": int(attrs.get(_DEPTH[1], 0)),
        "delayed": int(attrs.get(_DEPTH[2], 0)),
    }


def dlq_url(ctx: Context) -> str:
    """``DLQ_URL``, else the job queue's redrive target."""
    if ctx.environ.get(DLQ):
        return ctx.environ[DLQ]
    queue = ctx.require(QUEUE)[QUEUE]
    sqs = ctx.aws("sqs")
    attrs = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["RedrivePolicy"])
    policy = attrs.get("Attributes", {}).get("RedrivePolicy")
    if not policy:
        raise UsageError(f"set {DLQ}: the job queue has no redrive policy")
    arn = str(json.loads(policy)["deadLetterTargetArn"])
    account, name = arn.split(":")[4], arn.split(":")[5]
    return str(sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"])


def _watermark(ledger: Ledger) -> dict[str, Any]:
    from scrape_pipeline.geonode.listing_lag import JOBS_CHECKPOINT  # noqa: PLC0415
    from scrape_pipeline.ledger.bookkeeping import Bookkeeping  # noqa: PLC0415

    saved = Bookkeeping(ledger).read(JOBS_CHECKPOINT)
    if not saved or not saved.get("watermark"):
        return {"watermark": None, "resuming": False}
    return {
        "watermark": format_time(float(saved["watermark"])),
        # Passes cut short wait in "pending" (a JSON list); older versions kept "resume_page".
        "resuming": bool(saved.get("pending") or saved.get("resume_page")),
    }


def status(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline_ops.ledger import Ledger  # noqa: PLC0415

    names = ctx.require(LEDGER, QUEUE)
    sqs = ctx.aws("sqs")
    ledger = Ledger(names[LEDGER], client=ctx.aws("dynamodb"))
    report = {
        "ledger": ledger_counts(ledger),
        "queue": queue_depth(sqs, names[QUEUE]),
        "dlq": queue_depth(sqs, dlq_url(ctx)),
        "reconciler": _watermark(ledger),
    }
    if ctx.out.json_mode:
        ctx.out.record(report)
        return 0
    counts = report["ledger"]
    ctx.out.record({"jobs": counts["jobs"], **counts["by_state"]}, title="ledger rows by state")
    ctx.out.record(counts["by_outcome"] or {"(none)": 0}, title="DONE rows by outcome")
    ctx.out.record(counts["items"], title="batch and crawl items")
    ctx.out.record(counts["batches_and_crawls"] or {"(none)": 0}, title="batches and crawls")
    if counts["not_simply_stored"]:
        ctx.out.record(counts["not_simply_stored"], title="batches and crawls not all stored")
    ctx.out.record(report["queue"], title="job queue")
    ctx.out.record(report["dlq"], title="dead-letter queue")
    ctx.out.record(report["reconciler"], title="reconciler")
    return 0


# -- dlq -----------------------------------------------------------------------------------


def _receive(sqs: Any, url: str, count: int, visibility: int) -> list[dict[str, Any]]:
    response = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=max(1, min(10, count)),
        VisibilityTimeout=visibility,
        WaitTimeSeconds=0,
        MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
        MessageAttributeNames=["All"],
    )
    return list(response.get("Messages", []))


def _body(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _limit(value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError("--limit must be at least 1")


def dlq_inspect(ctx: Context, args: argparse.Namespace) -> int:
    _limit(args.limit)
    url = dlq_url(ctx)
    sqs = ctx.aws("sqs")
    rows: list[dict[str, Any]] = []
    handles: list[str] = []
    seen: set[str] = set()
    try:
        while len(rows) < args.limit:
            messages = _receive(sqs, url, args.limit - len(rows), _INSPECT_VISIBILITY)
            fresh = [m for m in messages if m["MessageId"] not in seen]
            handles += [m["ReceiptHandle"] for m in messages]
            if not fresh:
                break
            for m in fresh[: args.limit - len(rows)]:
                seen.add(m["MessageId"])
                attrs = m.get("Attributes", {})
                sent = attrs.get("SentTimestamp")
                rows.append(
                    {
                        "message_id": m["MessageId"],
                        "receive_count": int(attrs.get("ApproximateReceiveCount", 0)),
                        "sent_at": format_time(int(sent) / 1000) if sent else None,
                        "body": _body(m["Body"]),
                    }
                )
    finally:
        # Put them back at once: inspecting must not hide dead letters from a redrive.
        for start in range(0, len(handles), 10):
            sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                    for i, h in enumerate(handles[start : start + 10])
                ],
            )
    ctx.out.table(rows, DLQ_COLUMNS, title=f"dead letters ({len(rows)} shown)")
    return 0


def dlq_redrive(ctx: Context, args: argparse.Namespace) -> int:
    _limit(args.limit)
    queue = ctx.require(QUEUE)[QUEUE]
    url = dlq_url(ctx)
    sqs = ctx.aws("sqs")
    # Bounded by what is there now: a message that fails again and returns is not looped on.
    budget = args.limit if args.limit is not None else queue_depth(sqs, url)["visible"]
    moved: list[str] = []
    while len(moved) < budget:
        messages = _receive(sqs, url, budget - len(moved), _REDRIVE_VISIBILITY)
        if not messages:
            break
        for m in messages[: budget - len(moved)]:
            send: dict[str, Any] = {"QueueUrl": queue, "MessageBody": m["Body"]}
            if m.get("MessageAttributes"):
                send["MessageAttributes"] = m["MessageAttributes"]
            sqs.send_message(**send)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            moved.append(m["MessageId"])
    ctx.out.record({"moved": len(moved), "from": url, "to": queue, "message_ids": moved})
    return 0
