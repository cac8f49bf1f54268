"""``local up`` and ``local demo``: the whole pipeline on 127.0.0.1, without AWS or Docker.

``scrape_pipeline_local`` is local tooling, never shipped in the Lambda layer: it is imported
only here, only when one of these commands runs, and only once its ``local`` extra is found.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import socket
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from scrape_pipeline_ops.cli.config import UsageError
from scrape_pipeline_ops.cli.output import Printer

_MAX_PORT = 65535
_ARN_SUFFIX_LENGTH = 6  # Secrets Manager appends "-" and six characters to a secret's name

if TYPE_CHECKING:
    from scrape_pipeline_local.stack import LocalStack
    from scrape_pipeline_ops.cli.config import Context


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``local`` and its subcommands."""
    group = commands.add_parser(
        "local",
        parents=parents,
        help="run the pipeline locally (moto, the Geonode simulator, the real handlers)",
        description="The local stack: moto, the simulator, the API front, the SQS poller.",
    )
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "up",
        parents=parents,
        help="start the local stack and wait for Ctrl-C",
        description=(
            "Start the whole pipeline on 127.0.0.1 on a real clock: the SQS poller and the "
            "reconciler's schedule run in the background, the simulator delivers webhooks by "
            "itself. Prints the endpoints and the variables to export, then waits for Ctrl-C."
        ),
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="simulator seed (default 0)")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="run time X times faster (default 1: real time)",
    )
    for flag, what in (
        ("--port", "the API front (WEBHOOK_URL)"),
        ("--simulator-port", "the Geonode simulator (GEONODE_BASE_URL)"),
        ("--moto-port", "moto (AWS_ENDPOINT_URL, QUEUE_URL)"),
    ):
        p.add_argument(
            flag,
            type=int,
            default=0,
            metavar="N",
            help=f"fixed port of {what} on 127.0.0.1 (default: a free one at every start)",
        )
    p.add_argument(
        "--env-file",
        metavar="PATH",
        help="also write the export lines to PATH, for `source PATH` in another shell (they "
        "refuse `sam deploy`/`sync`/`delete` while sourced: it would deploy to moto)",
    )
    p.add_argument(
        "--function-log",
        metavar="PATH",
        help="where the functions' output goes: their logs and EMF metrics, as Lambda sends "
        "them to CloudWatch Logs (default: a new scrape-pipeline-local-*.log in the temp folder)",
    )
    p.set_defaults(handler=up)

    # Every argument after "demo" is the demo's own (main.py passes them on), --help included.
    p = sub.add_parser(
        "demo",
        help="run the demo (scrape_pipeline_local.demo); the arguments that follow are its own",
        description="Run scrape_pipeline_local.demo with the arguments that follow.",
        add_help=False,
    )
    p.set_defaults(handler=demo, passthrough=True)


def endpoints(stack: LocalStack) -> dict[str, str]:
    """What a user of the running stack needs: addresses and the variables to export."""
    from scrape_pipeline_local.stack import API_KEY  # noqa: PLC0415

    assert stack.simulator is not None and stack.front is not None
    assert stack.moto is not None and stack.resources is not None
    r = stack.resources
    # The local stack's key is a fixed development value, not a secret: printing it is the point.
    return {
        "GEONODE_BASE_URL": stack.simulator.base_url,
        "GEONODE_SCRAPER_API_KEY": API_KEY,
        "WEBHOOK_URL": stack.front.url("/webhooks/geonode"),
        "AWS_ENDPOINT_URL": stack.moto.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",  # moto's dummy credentials # nosec B105
        "LEDGER_TABLE_NAME": r.table,
        "QUEUE_URL": r.queue_url,
        "DLQ_URL": r.dlq_url,
        "RESULTS_BUCKET": r.bucket,
        "EVENT_BUS_NAME": r.event_bus,
        # Names, not ARNs: an ARN ends in a random suffix, new at every start.
        "WEBHOOK_SECRET_ID": _secret_name(r.webhook_secret_arn),
        "GEONODE_API_KEY_SECRET_ID": _secret_name(r.api_key_secret_arn),
    }


def _secret_name(arn: str) -> str:
    """A Secrets Manager ARN's secret name (Secrets Manager takes either as SecretId)."""
    _, _, named = arn.partition(":secret:")
    name, dash, suffix = named.rpartition("-")
    return name if named and dash and len(suffix) == _ARN_SUFFIX_LENGTH else arn


def wait_for_interrupt(stack: LocalStack) -> None:
    """Block until Ctrl-C (tests replace this)."""
    forever = threading.Event()
    while not forever.wait(0.5):
        pass


def require_local_stack() -> None:
    """Stop with the one line naming what to install when the local stack cannot run here."""
    from scrape_pipeline_local.extra import missing  # noqa: PLC0415 - standard library only

    problem = missing("scrape-pipeline local", checkout=True)
    if problem is not None:
        raise UsageError(problem)


def up(ctx: Context, args: argparse.Namespace) -> int:
    require_local_stack()
    from scrape_pipeline_local.clock import ScaledClock  # noqa: PLC0415
    from scrape_pipeline_local.function_env import functions_write_to  # noqa: PLC0415
    from scrape_pipeline_local.simulator import SimConfig  # noqa: PLC0415
    from scrape_pipeline_local.stack import LocalStack, StackSettings  # noqa: PLC0415

    if args.time_scale <= 0:
        raise UsageError("--time-scale must be positive")
    ports = {
        "front_port": ("--port", args.port),
        "simulator_port": ("--simulator-port", args.simulator_port),
        "moto_port": ("--moto-port", args.moto_port),
    }
    for flag, port in ports.values():
        if port < 0 or port > _MAX_PORT:
            raise UsageError(f"a port must be between 0 and {_MAX_PORT}")
        if port and _in_use(port):
            raise UsageError(
                f"{flag} {port}: 127.0.0.1:{port} is already in use (another `local up`?): "
                "stop it, or choose another port"
            )
    fixed = [port for _, port in ports.values() if port]
    if len(set(fixed)) < len(fixed):
        raise UsageError("--port, --simulator-port and --moto-port must differ")
    # What the person sees stays on the terminal; the functions' output goes to their log.
    shown = Printer(json_mode=ctx.out.json_mode, stdout=ctx.out.stdout, stderr=ctx.out.stderr)
    stack = LocalStack(
        ScaledClock(args.time_scale),
        SimConfig(seed=args.seed),
        StackSettings(**{name: port for name, (_, port) in ports.items()}),
    )
    with _function_log(args.function_log) as log, functions_write_to(log):
        try:
            # The handlers are imported here, inside the redirection (their Logger binds it).
            stack.start()
            assert stack.poller is not None and stack.schedule is not None
            stack.poller.start()
            stack.schedule.start()
            _show_started(shown, endpoints(stack), args, log.name)
            with contextlib.suppress(KeyboardInterrupt):  # the normal way to stop it
                wait_for_interrupt(stack)
        finally:
            stack.stop()
    shown.note("local stack stopped: its data is gone (a restart starts empty)")
    return 0


def _in_use(port: int) -> bool:
    """Whether a server listens on 127.0.0.1:``port`` (the servers bind with SO_REUSEADDR,
    so a port only in TIME_WAIT is free for them, and for this probe)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _function_log(path: str | None) -> TextIO:
    """The file the functions' output goes to: ``path``, or a new one in the temp folder."""
    if path is None:
        handle, path = tempfile.mkstemp(prefix="scrape-pipeline-local-", suffix=".log")
        os.close(handle)
    return Path(path).open("w", encoding="utf-8")


def _show_started(
    shown: Printer, found: dict[str, str], args: argparse.Namespace, log: str
) -> None:
    """The endpoints, the shell lines (and the env file), where the logs go, what a restart
    keeps."""
    from scrape_pipeline_local.shell_env import shell_lines  # noqa: PLC0415

    lines = shell_lines(found)
    if args.env_file:
        Path(args.env_file).write_text("\n".join(lines) + "\n")
    if shown.json_mode:
        shown.record({**found, "FUNCTION_LOG": log})
        return
    shown.record(
        {
            "simulator": found["GEONODE_BASE_URL"],
            "api key": found["GEONODE_SCRAPER_API_KEY"],
            "webhook url": found["WEBHOOK_URL"],
            "moto": found["AWS_ENDPOINT_URL"],
            "queue": found["QUEUE_URL"],
            "dlq": found["DLQ_URL"],
            "table": found["LEDGER_TABLE_NAME"],
            "bucket": found["RESULTS_BUCKET"],
            "function log": log,
        },
        title="local stack up",
    )
    shown.note("# in another shell (sam deploy, sync and delete are refused there: they would")
    shown.note("# reach moto, not AWS; local_stack_off undoes these lines):")
    for line in lines:
        shown.note(line)
    if args.env_file:
        shown.note(f"# or: source {shlex.quote(args.env_file)}")
    shown.note(f"# the functions' logs and metrics: {log}")
    shown.note(
        "# the data lives in memory: Ctrl-C or a restart loses the ledger, queues, bucket, "
        "secrets and the simulator's jobs; fixed ports keep only the addresses"
    )
    shown.note("# Ctrl-C stops the stack")


def demo(ctx: Context, args: argparse.Namespace) -> int:
    import importlib  # noqa: PLC0415

    require_local_stack()
    try:
        module = importlib.import_module("scrape_pipeline_local.demo")
    except ModuleNotFoundError as exc:
        if exc.name not in {"scrape_pipeline_local", "scrape_pipeline_local.demo"}:
            raise
        raise UsageError(
            "the demo (scrape_pipeline_local.demo) is not available in this checkout"
        ) from exc
    try:
        result = module.main(list(args.extra))
    except SystemExit as exc:  # the demo's own argparse: --help, or a usage error it printed
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return int(result or 0)
