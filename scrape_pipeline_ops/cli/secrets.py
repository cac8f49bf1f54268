"""``secrets put-api-key``: store the Geonode API key where the Lambdas read it.

The key comes from ``GEONODE_SCRAPER_API_KEY`` or stdin (a prompt that does not echo on a
terminal), never from the command line, where ``ps`` and the shell's history would show it.
Before it is stored, one cheap authenticated GET (the webhook list) makes sure Geonode accepts
it (``--no-check`` skips that). The value is never printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrape_pipeline.geonode.api_key import SECRET_ID_ENV
from scrape_pipeline.geonode.client import API_KEY_ENV
from scrape_pipeline.geonode.errors import AuthError
from scrape_pipeline_ops.cli.config import FailedError, UsageError

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.config import Context

_MAX_KEY_CHARS = 512


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``secrets`` and its subcommand."""
    group = commands.add_parser(
        "secrets",
        parents=parents,
        help="store the Geonode API key in the stack's secret",
        description="The secrets the pipeline reads from Secrets Manager.",
    )
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "put-api-key",
        parents=parents,
        help="store the API key from the environment or stdin (never argv)",
        description=(
            f"Store the Geonode API key in the secret the processor and the reconciler read "
            f"(--secret-id, default ${SECRET_ID_ENV}: the stack's GeonodeApiKeySecretArn with "
            f"--stack-name). The key is read from ${API_KEY_ENV}, else from stdin (a prompt "
            "that does not echo on a terminal); --stdin reads stdin even when the variable is "
            "set. Geonode is asked once (GET /v1/webhooks) whether it accepts the key before "
            "it is stored; --no-check skips that."
        ),
    )
    p.add_argument(
        "--secret-id", metavar="SECRET_ID", help=f"the secret (default ${SECRET_ID_ENV})"
    )
    p.add_argument("--stdin", action="store_true", help=f"read stdin even if ${API_KEY_ENV} is set")
    p.add_argument("--no-check", action="store_true", help="store without asking Geonode")
    p.set_defaults(handler=put_api_key)


def read_key(ctx: Context, *, from_stdin: bool) -> str:
    """The key from the environment, or stdin; ``UsageError`` when it is empty or malformed."""
    import sys  # noqa: PLC0415 - looked up now: tests and pipes replace stdin

    key = None if from_stdin else ctx.environ.get(API_KEY_ENV)
    if key is None:
        if sys.stdin.isatty():
            import getpass  # noqa: PLC0415

            key = getpass.getpass("Geonode API key (not echoed): ")
        else:
            key = sys.stdin.read()
    key = key.strip()
    if not key:
        raise UsageError(f"no API key: set {API_KEY_ENV} or pipe the key to stdin")
    if len(key) > _MAX_KEY_CHARS or not key.isascii() or not key.isprintable() or " " in key:
        raise UsageError("that is not an API key: one line of printable ASCII without spaces")
    ctx.sensitive(key)
    return key


def put_api_key(ctx: Context, args: argparse.Namespace) -> int:
    if getattr(args, "api_key", None):
        raise UsageError(
            f"put-api-key never takes the key from the command line (ps shows it): "
            f"set {API_KEY_ENV} or pipe it to stdin"
        )
    secret_id = args.secret_id or ctx.environ.get(SECRET_ID_ENV)
    if not secret_id:
        raise UsageError(f"pass --secret-id SECRET_ID or --stack-name, or set {SECRET_ID_ENV}")
    key = read_key(ctx, from_stdin=args.stdin)
    if not args.no_check:
        with ctx.client(api_key=key) as client:
            try:
                client.list_webhooks()
            except AuthError as exc:
                raise FailedError(
                    f"Geonode rejects this key (HTTP {exc.status_code}); it was not stored"
                ) from exc
    # A botocore error reaches main, which names it (AWS's message never holds the value).
    ctx.aws("secretsmanager").put_secret_value(SecretId=secret_id, SecretString=key)
    ctx.out.record({"secret_id": secret_id, "stored": True, "checked": not args.no_check})
    return 0
