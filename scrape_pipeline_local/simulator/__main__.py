"""``geonode-sim``: run the simulator as a command and print its base URL."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from scrape_pipeline_local.clock import ScaledClock
from scrape_pipeline_local.simulator.config import (
    CONTENT_SIZE_MODELS,
    SIGNATURE_SCHEMES,
    WEBHOOK_TIMESTAMPS,
    FaultSettings,
    SimConfig,
)
from scrape_pipeline_local.simulator.server import SimulatorServer


def _parser() -> argparse.ArgumentParser:
    defaults = SimConfig()
    parser = argparse.ArgumentParser(prog="geonode-sim", description=__doc__)
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    add("--port", type=int, default=0, help="port; 0 picks a free one (default 0)")
    add("--seed", type=int, default=defaults.seed)
    add("--api-key", action="append", dest="api_keys", help="accepted key (repeatable)")
    add("--time-scale", type=float, default=1.0, help="run the clock this many times faster")
    add("--webhook-time-scale", type=float, default=defaults.webhook_time_scale)
    add(
        "--webhook-timestamp",
        choices=WEBHOOK_TIMESTAMPS,
        default=defaults.webhook_timestamp,
        help="the envelope's timestamp: each attempt's time, or the event's on every retry",
    )
    add("--scheme", choices=SIGNATURE_SCHEMES, default=defaults.signature_scheme)
    add("--signature-header", default=defaults.signature_header)
    add("--signature-prefix", default=defaults.signature_prefix)
    add("--legacy-error-shape", action="store_true")
    add("--job-list-field", choices=("jobs", "items"), default=defaults.job_list_field)
    add("--rate", type=float, default=defaults.rate_limit_per_s, help="requests/s per key; 0: off")
    add("--burst", type=int, default=defaults.rate_limit_burst)
    add("--retryable-failure-rate", type=float, default=defaults.retryable_failure_rate)
    add("--permanent-failure-rate", type=float, default=defaults.permanent_failure_rate)
    add("--item-retryable-failure-rate", type=float, default=None)
    add("--min-duration", type=float, default=defaults.job_duration_min_s)
    add("--max-duration", type=float, default=defaults.job_duration_max_s)
    add(
        "--content-size",
        choices=CONTENT_SIZE_MODELS,
        default=defaults.content_size,
        help="page sizes: natural (small) or lognormal (heavy tail up to 8 MiB)",
    )
    add("--drop-rate", type=float, default=0.0)
    add("--duplicate-rate", type=float, default=0.0)
    add("--flat-fields", action="store_true", help="also put job_id/event_type/id at the top")
    return parser


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """The SimConfig the command line asks for."""
    return SimConfig(
        seed=args.seed,
        api_keys=tuple(args.api_keys) if args.api_keys else SimConfig().api_keys,
        legacy_error_shape=args.legacy_error_shape,
        job_list_field=args.job_list_field,
        job_duration_min_s=args.min_duration,
        job_duration_max_s=args.max_duration,
        retryable_failure_rate=args.retryable_failure_rate,
        permanent_failure_rate=args.permanent_failure_rate,
        item_retryable_failure_rate=args.item_retryable_failure_rate,
        content_size=args.content_size,
        rate_limit_per_s=args.rate,
        rate_limit_burst=args.burst,
        webhook_time_scale=args.webhook_time_scale,
        webhook_flat_fields=args.flat_fields,
        webhook_timestamp=args.webhook_timestamp,
        signature_scheme=args.scheme,
        signature_header=args.signature_header,
        signature_prefix=args.signature_prefix,
        faults=FaultSettings(drop_rate=args.drop_rate, duplicate_rate=args.duplicate_rate),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; the first line printed is the base URL."""
    args = _parser().parse_args(argv)
    clock = ScaledClock(args.time_scale)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with SimulatorServer(config_from_args(args), clock, host=args.host, port=args.port) as server:
        print(server.base_url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
