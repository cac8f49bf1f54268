"""``webhooks``: setup, register, list, delete, enable, disable, rotate-secret.

A subscription's secret is shown by the API once, at creation (and at each rotation): it goes
straight into the Secrets Manager bundle the receiver reads, and is printed only when asked
(``--show-secret``). The bundle is read before the subscription is created, so an unreachable
store fails before there is a secret to lose; a failed write deletes the new subscription.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.geonode.webhooks import Webhook
from scrape_pipeline.receiver.payload import EVENT_KINDS
from scrape_pipeline_ops.cli.config import FailedError, UsageError

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context
    from scrape_pipeline_ops.rotation import SecretBundle

COLUMNS = ("id", "event_type", "is_active", "url", "description", "created_at")
SETUP_COLUMNS = ("event_type", "action", "id", "url")
WEBHOOK_SECRET_ENV = "WEBHOOK_SECRET_ID"  # noqa: S105 - a variable name, not a secret # nosec B105
WEBHOOK_URL_ENV = "WEBHOOK_URL"


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``webhooks`` and its subcommands."""
    group = commands.add_parser(
        "webhooks",
        parents=parents,
        help="manage webhook subscriptions and their secrets",
        description="Manage the account's webhook subscriptions (one event type each).",
    )
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser(
        "setup",
        parents=parents,
        help="subscribe the stack's URL to every event type once, secrets stored",
        description=(
            "Make sure each event type has one active subscription to the stack's webhook URL "
            "(--url, default $WEBHOOK_URL: the stack's WebhookUrl with --stack-name) and that "
            "the secret bundle (--secret-id, default $WEBHOOK_SECRET_ID) holds its secret. "
            "An active subscription is kept, a disabled one enabled, a missing one created "
            "and its secret stored at once; the stack's placeholder secret is dropped. A kept "
            "subscription for which the bundle holds no valid secret has its secret rotated "
            "into it (nothing could verify it anyway). A second run changes nothing."
        ),
    )
    p.add_argument("--url", metavar="URL", help=f"the receiver's URL (default ${WEBHOOK_URL_ENV})")
    p.add_argument(
        "--secret-id",
        metavar="SECRET_ID",
        help=f"the secret bundle (default ${WEBHOOK_SECRET_ENV})",
    )
    p.add_argument(
        "--event",
        dest="events",
        action="append",
        choices=sorted(EVENT_KINDS),
        metavar="EVENT_TYPE",
        help="only this event type (repeatable; default all three)",
    )
    p.add_argument("--description", default="scrape-pipeline", metavar="D")
    p.set_defaults(handler=setup)

    p = sub.add_parser(
        "register",
        parents=parents,
        help="subscribe a URL to an event type",
        description=(
            "Subscribe URL to EVENT_TYPE. The API shows the new secret only now: it is added "
            "to the secret bundle the receiver reads (Secrets Manager): --store-secret, "
            f"default ${WEBHOOK_SECRET_ENV} (--stack-name sets it); with --show-secret alone "
            "it is only printed. 'webhooks setup' registers all three for a stack at once."
        ),
    )
    p.add_argument("url", metavar="URL")
    p.add_argument("event_type", metavar="EVENT_TYPE", choices=sorted(EVENT_KINDS))
    p.add_argument("--description", metavar="D")
    p.add_argument(
        "--store-secret",
        metavar="SECRET_ID",
        help=f"Secrets Manager bundle id/ARN (default ${WEBHOOK_SECRET_ENV}, the stack's)",
    )
    p.add_argument("--show-secret", action="store_true", help="print the new secret")
    p.set_defaults(handler=register)

    p = sub.add_parser("list", parents=parents, help="list the subscriptions")
    p.set_defaults(handler=list_webhooks)

    for name, handler, text in (
        ("delete", delete, "remove a subscription"),
        ("enable", enable, "resume deliveries"),
        ("disable", disable, "stop deliveries (the reconciler still finds the jobs)"),
    ):
        p = sub.add_parser(name, parents=parents, help=text, description=text[0].upper() + text[1:])
        p.add_argument("webhook_id", metavar="ID")
        p.set_defaults(handler=handler)

    p = sub.add_parser(
        "rotate-secret",
        parents=parents,
        help="rotate a secret with no downtime",
        description=(
            "Rotate the subscription's secret at the API, store the new one in the bundle "
            "(its previous ones stay valid for --grace-seconds; the other subscriptions' are "
            "untouched), then replay the deliveries "
            "rejected with 401 during the switch (needs LEDGER_TABLE_NAME and QUEUE_URL, or "
            "--stack-name; skip with --no-replay)."
        ),
    )
    p.add_argument("webhook_id", metavar="ID")
    p.add_argument(
        "--secret-id",
        metavar="SECRET_ID",
        help=f"the secret bundle (default ${WEBHOOK_SECRET_ENV})",
    )
    p.add_argument("--grace-seconds", type=float, default=86_400.0, metavar="S")
    p.add_argument("--no-replay", action="store_true", help="do not replay 401 deliveries")
    p.set_defaults(handler=rotate_secret)


def webhook_record(hook: Webhook) -> dict[str, Any]:
    """A subscription as printed (never its secret)."""
    return {
        "id": hook.id,
        "event_type": hook.event_type,
        "is_active": hook.is_active,
        "url": hook.url,
        "description": hook.description,
        "created_at": format_time(hook.created_at) if hook.created_at else None,
    }


def _bundle(ctx: Context, secret_id: str) -> SecretBundle:
    from scrape_pipeline_ops.rotation import SecretBundle  # noqa: PLC0415

    return SecretBundle(secret_id, client=ctx.aws("secretsmanager"))


def register(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline_ops.rotation import with_new_secret  # noqa: PLC0415

    _check_url(args.url)
    store_in = args.store_secret
    if not store_in and not args.show_secret:
        store_in = ctx.environ.get(WEBHOOK_SECRET_ENV)  # the stack's, with --stack-name
    if not store_in and not args.show_secret:
        raise UsageError(
            "the API shows the secret only once: pass --store-secret SECRET_ID or --stack-name "
            f"(or set {WEBHOOK_SECRET_ENV}), or --show-secret"
        )
    client = ctx.client()
    bundle = _bundle(ctx, store_in) if store_in else None
    current = bundle.read() if bundle is not None else None  # unreachable store: fail now
    hook = client.create_webhook(args.url, args.event_type, description=args.description)
    ctx.sensitive(hook.secret)
    if not hook.secret:
        raise FailedError(f"webhook {hook.id} was created but the API returned no secret")
    record = webhook_record(hook)
    if bundle is not None and current is not None:
        try:
            bundle.write(with_new_secret(current, hook.id, hook.secret, ctx.clock.time()))
        except AWSUnavailableError as exc:
            if args.show_secret:
                ctx.out.record({**record, "secret": hook.secret})
                raise FailedError(
                    f"webhook {hook.id} was created but its secret could not be stored "
                    f"({exc.code}): store the secret shown by hand"
                ) from exc
            raise FailedError(_undo(ctx, hook.id, exc.code)) from exc
        record["secret_stored_in"] = store_in
    if args.show_secret:
        record["secret"] = hook.secret
    ctx.out.record(record)
    return 0


def _check_url(url: str) -> None:
    if not re.match(r"https?://\S+$", url):
        raise UsageError(f"not an http(s) URL: {url[:80]!r}")


def _undo(ctx: Context, webhook_id: str, code: str) -> str:
    """Delete a subscription whose secret could not be stored (no one could verify it)."""
    message = f"webhook {webhook_id} was created but its secret could not be stored ({code})"
    try:
        ctx.client().delete_webhook(webhook_id)
    except GeonodeError:
        return f"{message}; delete it (webhooks delete {webhook_id}) and register again"
    return f"{message}; it was deleted again: register it once the store is reachable"


def list_webhooks(ctx: Context, args: argparse.Namespace) -> int:
    hooks = ctx.client().list_webhooks()
    ctx.out.table([webhook_record(h) for h in hooks], COLUMNS, title="webhook subscriptions")
    return 0


def delete(ctx: Context, args: argparse.Namespace) -> int:
    ctx.client().delete_webhook(args.webhook_id)
    ctx.out.record({"id": args.webhook_id, "deleted": True})
    return 0


def _set_active(ctx: Context, webhook_id: str, active: bool) -> int:
    hook = ctx.client().update_webhook(webhook_id, is_active=active)
    ctx.out.record(webhook_record(hook))
    return 0


def enable(ctx: Context, args: argparse.Namespace) -> int:
    return _set_active(ctx, args.webhook_id, True)


def disable(ctx: Context, args: argparse.Namespace) -> int:
    return _set_active(ctx, args.webhook_id, False)


def rotate_secret(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline_ops.rotation import rotate_webhook_secret  # noqa: PLC0415

    if args.grace_seconds <= 0:
        raise UsageError("--grace-seconds must be positive")
    secret_id = bundle_id(ctx, args.secret_id)
    reconciler = None
    if not args.no_replay:
        from scrape_pipeline.wiring.reconciler import build_reconciler  # noqa: PLC0415

        # Built before rotating: missing settings stop the command while nothing has changed.
        env = ctx.wiring_env("LEDGER_TABLE_NAME", "QUEUE_URL")
        reconciler = build_reconciler(env, clock=ctx.clock)
    result = rotate_webhook_secret(
        ctx.client(),
        args.webhook_id,
        _bundle(ctx, secret_id),
        grace_seconds=args.grace_seconds,
        replay_with=reconciler,
        clock=ctx.clock,
    )
    ctx.out.record(
        {
            "webhook_id": result.webhook_id,
            "secret_id": secret_id,
            "rotated_at": format_time(result.started_at),
            "previous_valid_until": format_time(result.previous_valid_until),
            "secrets_kept": result.secrets_kept,
            "replayed": result.replayed if reconciler is not None else None,
        }
    )
    return 0


def bundle_id(ctx: Context, flag: str | None) -> str:
    """The secret bundle's id: the flag, else ``WEBHOOK_SECRET_ID`` (set by --stack-name)."""
    secret_id = flag or ctx.environ.get(WEBHOOK_SECRET_ENV)
    if not secret_id:
        raise UsageError(f"pass --secret-id SECRET_ID or --stack-name, or set {WEBHOOK_SECRET_ENV}")
    return secret_id


def webhook_url(ctx: Context, flag: str | None) -> str:
    """The receiver's URL: the flag, else ``WEBHOOK_URL`` (the stack's ``WebhookUrl``)."""
    url = flag or ctx.environ.get(WEBHOOK_URL_ENV)
    if not url:
        raise UsageError(f"pass --url URL or --stack-name, or set {WEBHOOK_URL_ENV}")
    _check_url(url)
    return url


def setup(ctx: Context, args: argparse.Namespace) -> int:
    from scrape_pipeline_ops.rotation import with_new_secret  # noqa: PLC0415

    url = webhook_url(ctx, args.url)
    bundle = _bundle(ctx, bundle_id(ctx, args.secret_id))
    contents = bundle.contents()  # unreachable or malformed: fail before changing anything
    secrets = contents.secrets
    client = ctx.client()
    hooks = client.list_webhooks()
    rows: list[dict[str, Any]] = []
    kept: list[Webhook] = []
    for event_type in sorted(set(args.events or EVENT_KINDS)):
        mine = [h for h in hooks if h.event_type == event_type and h.url == url]
        active = [h for h in mine if h.is_active]
        if active:
            kept.append(active[0])
            extra = f" ({len(active) - 1} more active: delete them)" if len(active) > 1 else ""
            rows.append({**_setup_row(active[0], "kept"), "action": "kept" + extra})
            continue
        if mine:
            hook = client.update_webhook(mine[0].id, is_active=True)
            kept.append(hook)
            rows.append(_setup_row(hook, "enabled"))
            continue
        hook = client.create_webhook(url, event_type, description=args.description)
        ctx.sensitive(hook.secret)
        if not hook.secret:
            raise FailedError(f"webhook {hook.id} was created but the API returned no secret")
        secrets = with_new_secret(secrets, hook.id, hook.secret, ctx.clock.time())
        try:  # at once: the API never shows this secret again
            bundle.write(secrets)
        except AWSUnavailableError as exc:
            raise FailedError(_undo(ctx, hook.id, exc.code)) from exc
        rows.append(_setup_row(hook, "created"))
    # The bundle verifies none of these kept subscriptions' deliveries (placeholder, no entry,
    # every secret expired): their secrets are lost, so rotating them costs nothing and
    # stores them.
    for hook_id in contents.without_valid_secret([h.id for h in kept], ctx.clock.time()):
        new_secret = client.rotate_webhook_secret(hook_id)
        ctx.sensitive(new_secret)
        secrets = with_new_secret(secrets, hook_id, new_secret, ctx.clock.time())
        try:
            bundle.write(secrets)
        except AWSUnavailableError as exc:
            raise FailedError(
                f"webhook {hook_id}'s secret was rotated but could not be stored "
                f"({exc.code}); run webhooks setup again once Secrets Manager is reachable"
            ) from exc
        for row in rows:
            if row["id"] == hook_id:
                row["action"] += ", secret rotated into the bundle"
    ctx.out.table(rows, SETUP_COLUMNS, title=f"webhooks for {url}")
    if contents.placeholder:
        ctx.out.note("the stack's placeholder secret was replaced by the subscriptions' secrets")
    return 0


def _setup_row(hook: Webhook, action: str) -> dict[str, Any]:
    return {"event_type": hook.event_type, "action": action, "id": hook.id, "url": hook.url}
