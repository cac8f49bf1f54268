"""The ``scrape-pipeline`` entry point: the argparse tree, and failures turned into one line.

Every mistake or failure ends as ``scrape-pipeline: error: <one line>`` on stderr, never a
traceback, with exit status 2 (usage or configuration), 1 (the API or AWS failed) or 130
(Ctrl-C). The runtime's errors are told apart by class (``scrape_pipeline.errors`` draws the
tree); a botocore error a command let through is named by ``scrape_pipeline.aws_errors``, not
here. Known secrets are scrubbed from that line. An unexpected exception (a bug) is one line
too, exit 1; ``SCRAPE_PIPELINE_TRACEBACK=1`` lets its traceback through.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from scrape_pipeline.aws_errors import AWS_ERRORS
from scrape_pipeline.clock import Clock, active_clock
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.errors import GeonodeError, MissingAPIKeyError
from scrape_pipeline_ops.aws_translate import AWSConfigurationError, translate
from scrape_pipeline_ops.cli import (
    audit,
    deliveries,
    doctor,
    events,
    local,
    ops,
    poll,
    results,
    runs,
    submit,
    webhooks,
)
from scrape_pipeline_ops.cli import secrets as secret_commands
from scrape_pipeline_ops.cli.config import CliError, Context, UsageError, export_stack
from scrape_pipeline_ops.cli.output import Printer
from scrape_pipeline_ops.rotation import SecretNotStoredError

PROG = "scrape-pipeline"
DISTRIBUTION = "scrape-pipeline"
EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
_MAX_ERROR_CHARS = 400
TRACEBACK_ENV = "SCRAPE_PIPELINE_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are raised (then printed as one line), not exited on."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class _VersionAction(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib import metadata  # noqa: PLC0415 - only --version pays for it

        try:
            version = metadata.version(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        sys.stdout.write(f"{PROG} {version}\n")
        parser.exit()


def _common_options() -> argparse.ArgumentParser:
    """Options every command takes, before or after the command name (defaults applied later)."""
    common = _Parser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument(
        "--base-url",
        default=s,
        metavar="URL",
        help="Geonode API base URL (default $GEONODE_BASE_URL or https://scraper.geonode.io)",
    )
    common.add_argument(
        "--api-key",
        default=s,
        metavar="KEY",
        help="API key (default $GEONODE_SCRAPER_API_KEY; the variable keeps it out of ps)",
    )
    common.add_argument(
        "--api-key-secret-id",
        default=s,
        metavar="SECRET_ID",
        help=(
            "read the API key from Secrets Manager (default $GEONODE_API_KEY_SECRET_ID); "
            "like every flag, it beats the environment, $GEONODE_SCRAPER_API_KEY included"
        ),
    )
    common.add_argument(
        "--stack-name",
        default=s,
        metavar="NAME",
        help="take the AWS resources from this CloudFormation stack's outputs",
    )
    common.add_argument("--json", action="store_true", default=s, help="print JSON lines")
    return common


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    common = _common_options()
    parser = _Parser(
        prog=PROG,
        parents=[common],
        description=(
            "Operate the Geonode results pipeline: submit and poll jobs, manage webhooks and "
            "their secrets, replay deliveries, reconcile, inspect the ledger and the DLQ, run "
            "it all locally. AWS resources come from LEDGER_TABLE_NAME, QUEUE_URL, DLQ_URL, "
            "RESULTS_BUCKET, WEBHOOK_SECRET_ID, GEONODE_API_KEY_SECRET_ID or --stack-name."
        ),
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parents = [common]
    submit.add_parser(commands, parents)
    runs.add_parser(commands, parents)
    poll.add_parser(commands, parents)
    webhooks.add_parser(commands, parents)
    secret_commands.add_parser(commands, parents)
    doctor.add_parser(commands, parents)
    deliveries.add_parser(commands, parents)
    ops.add_parsers(commands, parents)
    events.add_parser(commands, parents)
    local.add_parser(commands, parents)
    audit.add_parser(commands, parents)
    results.add_parser(commands, parents)
    return parser


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    args, extra = parser.parse_known_args(list(argv))
    if extra and not getattr(args, "passthrough", False):
        raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    for name, default in (
        ("json", False),
        ("base_url", None),
        ("api_key", None),
        ("api_key_secret_id", None),
        ("stack_name", None),
    ):
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


def _failure(exc: BaseException) -> tuple[int, str]:
    """The exit status and the message for an exception that reached the top."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(exc, AWS_ERRORS):
        # Commands call boto3 directly (a Scan, a queue's attributes): aws_errors names it.
        exc = translate(exc)
    if isinstance(exc, CliError):
        return exc.exit_code, str(exc)
    if isinstance(exc, MissingAPIKeyError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, GeonodeError):
        return EXIT_FAILED, f"Geonode API: {exc}"
    if isinstance(exc, AWSConfigurationError | ValueError):  # ValueError: SettingsError too
        return EXIT_USAGE, str(exc)
    if isinstance(exc, PipelineError | SecretNotStoredError):
        return EXIT_FAILED, str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return (EXIT_USAGE if exc.filename else EXIT_FAILED), f"{where}{exc.strerror or exc}"
    raise exc


_HANDLED: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    CliError,
    PipelineError,
    SecretNotStoredError,
    *AWS_ERRORS,
    ValueError,
    OSError,
)


def _keys_in(argv: Sequence[str]) -> list[str]:
    """The API key when given on the command line, so an error about argv cannot show it."""
    found = []
    for i, arg in enumerate(argv):
        if arg == "--api-key" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--api-key="):
            found.append(arg.partition("=")[2])
    return found


def _redact(message: str, ctx: Context | None, argv: Sequence[str]) -> str:
    for key in _keys_in(argv):
        if len(key) >= 4:
            message = message.replace(key, "<redacted>")
    return ctx.redact(message) if ctx is not None else message


def main(argv: Sequence[str] | None = None, *, clock: Clock | None = None) -> int:
    """Run one command; returns the exit status. ``clock`` is for tests (a manual clock)."""
    argv = sys.argv[1:] if argv is None else argv
    printer = Printer(json_mode="--json" in argv)
    ctx: Context | None = None
    try:
        try:
            args = _parse(argv)
        except SystemExit as exc:  # --help and --version print and stop here
            return exc.code if isinstance(exc.code, int) else 0
        printer.json_mode = bool(args.json)
        ctx = Context(args, printer=printer, clock=clock or active_clock())
        if args.stack_name:
            export_stack(args.stack_name, client=ctx.aws("cloudformation"))
        return int(args.handler(ctx, args) or 0)
    except BrokenPipeError:
        # The reader went away (| head): stop quietly; keep Python from complaining at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_FAILED
    except _HANDLED as exc:
        code, message = _failure(exc)
        message = _redact(message or type(exc).__name__, ctx, argv)
        printer.error(message[:_MAX_ERROR_CHARS])
        return code
    except Exception as exc:  # a bug still ends in one line, unless asked
        if os.environ.get(TRACEBACK_ENV):
            raise
        message = _redact(f"internal error: {type(exc).__name__}: {exc}", ctx, argv)
        printer.error(f"{message[:_MAX_ERROR_CHARS]} (set {TRACEBACK_ENV}=1 for the traceback)")
        return EXIT_FAILED
    finally:
        if ctx is not None:
            ctx.close()


if __name__ == "__main__":
    sys.exit(main())
