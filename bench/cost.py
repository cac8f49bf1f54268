"""Cost model: dollars per million jobs, from unit prices and call counts measured in the runs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.cadence import Cadence

LINES = Path(__file__).resolve().parent / "templates" / "cost_lines.md"  # the lines, as data
PRICES_AS_OF = "published list price, as of 2026-11, check before relying"
PER_MILLION = 1_000_000
SECONDS_PER_MONTH = 30 * 86_400


@dataclass(frozen=True)
class Prices:
    """Unit prices in dollars per single unit (request, GB-second, capacity unit)."""

    lambda_request: float = 0.20 / 1_000_000
    lambda_gb_second_x86: float = 0.0000166667
    lambda_gb_second_arm64: float = 0.0000133334
    apigw_rest_request: float = 3.50 / 1_000_000
    dynamodb_write_unit: float = 0.625 / 1_000_000
    dynamodb_read_unit: float = 0.125 / 1_000_000
    sqs_request: float = 0.40 / 1_000_000  # per 64 KB chunk of a request's payload
    s3_put: float = 0.005 / 1_000  # PUT, COPY, POST, LIST
    s3_get: float = 0.0004 / 1_000  # GET, SELECT and the rest
    secrets_api_call: float = 0.05 / 10_000
    eventbridge_event: float = 1.00 / 1_000_000  # per 64 KB chunk of an entry
    geonode_request: float = 3.50 / 10_000


_LAMBDA, _DYNAMODB = "AWS Lambda pricing, us-east-1", "Amazon DynamoDB pricing, us-east-1"
_SQS, _S3 = "Amazon SQS pricing, us-east-1", "Amazon S3 pricing, us-east-1"
# field -> (the price as published, where it is published); all PRICES_AS_OF.
PRICE_SOURCES: dict[str, tuple[str, str]] = {
    "lambda_request": ("$0.20 per 1M requests", _LAMBDA),
    "lambda_gb_second_x86": ("$0.0000166667 per GB-second (x86)", _LAMBDA),
    "lambda_gb_second_arm64": ("$0.0000133334 per GB-second (arm64)", _LAMBDA),
    "apigw_rest_request": (
        "$3.50 per 1M requests (REST API, first tier)",
        "Amazon API Gateway pricing, us-east-1",
    ),
    "dynamodb_write_unit": ("$0.625 per 1M write request units (on-demand)", _DYNAMODB),
    "dynamodb_read_unit": ("$0.125 per 1M read request units (on-demand)", _DYNAMODB),
    "sqs_request": ("$0.40 per 1M requests (standard queue, 64 KB chunks)", _SQS),
    "s3_put": ("$0.005 per 1,000 PUT requests (S3 Standard)", _S3),
    "s3_get": ("$0.0004 per 1,000 GET requests (S3 Standard)", _S3),
    "secrets_api_call": ("$0.05 per 10,000 API calls", "AWS Secrets Manager pricing"),
    "eventbridge_event": (
        "$1.00 per 1M custom events published (64 KB chunks)",
        "Amazon EventBridge pricing, us-east-1",
    ),
    "geonode_request": (
        "$3.50 per 10,000 requests (pay as you go)",
        "Geonode Scraper API, shared/docs/geonode-api.md",
    ),
}


@dataclass(frozen=True)
class Assumptions:
    """What the runs cannot measure. Durations are guesses for real AWS, not moto's; the
    reconciler's cadence is the template's (``Assumptions.on``), never a constant here."""

    reconcile_interval_s: float  # ReconcileSchedule: one run (an invocation) per interval
    job_list_interval_s: float  # RECONCILE_FULL_SWEEP_SECONDS: the job list's pace, healthy
    reconcile_overlap_s: float  # RECONCILE_OVERLAP_SECONDS: listed jobs read again
    jobs_per_month: float = 1_000_000  # steady volume: amortises the time-based costs
    lambda_memory_mb: int = 256  # template.yaml Globals
    arm64: bool = True  # template.yaml Globals: Architectures [arm64]
    receiver_ms: float = 30.0  # a put and a send in-region, ~0.5 ms of own time (receiver.json)
    processor_ms_per_job: float = 400.0  # one Geonode GET (~300 ms) + ledger and S3 calls
    reconciler_ms_per_run: float = 3_000.0  # a few Geonode pages and ledger queries
    jobs_page_size: int = 100  # JOBS_PAGE_MAX of the job list
    # Before each fresh pass the job list counts the range below it and the range the last
    # check counted (one-job pages whose page count is the count): jobs listed late.
    count_queries_per_listing: int = 2
    write_units_per_write: float = 1.0  # ledger rows stay under 1 KB
    read_units_per_read: float = 1.0  # strongly consistent reads of rows under 4 KB
    esm_pollers: int = 5  # the SQS event source's long-polling pollers when idle
    esm_wait_s: float = 20.0  # their long-poll wait
    receiver_secret_cache_s: float = 60.0  # SECRET_CACHE_SECONDS
    processor_secret_cache_s: float = 300.0  # Powertools parameters' default max_age
    warm_containers: int = 1  # per function: secret refreshes scale with it

    @classmethod
    def on(cls, cadence: Cadence) -> Assumptions:
        """The model at ``cadence``, the template's reconciler as the benchmarks ran it."""
        return cls(
            reconcile_interval_s=cadence.interval_seconds,
            job_list_interval_s=cadence.full_sweep_seconds,
            reconcile_overlap_s=cadence.overlap_seconds,
        )

    @property
    def reconciler_runs_per_job(self) -> float:
        return SECONDS_PER_MONTH / self.reconcile_interval_s / self.jobs_per_month

    @property
    def job_listings_per_job(self) -> float:
        """Job-list sweeps per job: at the full-sweep pace while webhooks arrive complete."""
        return SECONDS_PER_MONTH / self.job_list_interval_s / self.jobs_per_month

    @property
    def listed_again(self) -> float:
        """Each listed job's share read again by the next listing's overlap."""
        return 1 + self.reconcile_overlap_s / self.job_list_interval_s

    @property
    def gb_second_price_field(self) -> str:
        return "lambda_gb_second_arm64" if self.arm64 else "lambda_gb_second_x86"


@dataclass(frozen=True)
class PipelineMeasure:
    """Counts from one webhook-pipeline run (totals over the run, not per job)."""

    settled_jobs: int
    job_reads: int  # GET /v1/extract/{job_id}: the processor's fetches
    deliveries: int  # webhook attempts the receiver answered
    duplicate_deliveries: int  # of those, repeats of a delivery already recorded
    processor_batches: int  # processor invocations
    processor_calls: Mapping[str, int]  # "dynamodb:UpdateItem" -> calls over the run
    event_source_calls: Mapping[str, int]  # non-empty receives and batch deletes
    reconciler_runs: int
    reconciler_calls: Mapping[str, int]  # the ledger and watermark calls of every run
    reconciler_fixed_reads: int  # subscriptions and delivery-log pages over every run
    receiver_calls_new: int = 2  # bench/results/receiver.json
    receiver_calls_duplicate: int = 1
    outcomes: int | None = None  # outcomes told on the bus (None: one per settled job)


@dataclass(frozen=True)
class Line:
    """One thing paid for, per job."""

    mode: str
    component: str
    item: str
    per_job: float
    unit: str
    unit_price: float
    basis: str

    @property
    def category(self) -> str:
        """ "geonode" or "aws": whose bill the line is on."""
        return "geonode" if self.component == "Geonode" else "aws"

    @property
    def per_million(self) -> float:
        """Dollars per million jobs."""
        return self.per_job * self.unit_price * PER_MILLION


def gb_seconds(memory_mb: float, milliseconds: float) -> float:
    """GB-seconds of one invocation (Lambda bills memory in MB / 1024 and time per ms)."""
    return memory_mb / 1024 * math.ceil(milliseconds) / 1000


def total(lines: list[Line]) -> float:
    """Dollars per million jobs for these lines."""
    return sum(line.per_million for line in lines)


def by_category(lines: list[Line]) -> dict[str, float]:
    """Dollars per million jobs, Geonode against AWS."""
    out = {"geonode": 0.0, "aws": 0.0}
    for line in lines:
        out[line.category] += line.per_million
    return out


COMPONENT_ORDER = (
    "Geonode",
    "API Gateway",
    "receiver λ",
    "SQS event source",
    "processor λ",
    "reconciler λ",
    "EventBridge",
    "Secrets Manager",
    "S3",
)
_DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}
_DYNAMODB_READS = {"GetItem", "Query", "Scan"}
_S3_PUT_TIER = {"PutObject", "CopyObject", "ListObjects", "ListObjectsV2", "ListObjectVersions"}


def aws_call_line(
    component: str,
    call: str,
    per_job: float,
    basis: str,
    *,
    mode: str,
    prices: Mapping[str, float],
    assumptions: Assumptions,
) -> Line | None:
    """The line for ``per_job`` calls of ``service:Operation``; None for calls priced elsewhere."""
    service, operation = call.split(":", 1)
    if service == "dynamodb" and operation in _DYNAMODB_WRITES:
        units, unit, price = assumptions.write_units_per_write, "write unit", "dynamodb_write_unit"
    elif service == "dynamodb" and operation in _DYNAMODB_READS:
        units, unit, price = assumptions.read_units_per_read, "read unit", "dynamodb_read_unit"
    elif service == "sqs":
        units, unit, price = 1.0, "request", "sqs_request"
    elif service == "s3" and operation in _S3_PUT_TIER:
        units, unit, price = 1.0, "PUT-tier request", "s3_put"
    elif service == "s3":
        units, unit, price = 1.0, "GET-tier request", "s3_get"
    else:
        return None
    item = f"{service} {operation}"
    return Line(mode, component, item, per_job * units, unit, prices[price], basis)


def _rows(kind: str) -> list[list[str]]:
    """``templates/cost_lines.md``'s rows for ``kind`` ("pipeline", "poller"), less that column."""
    cells = (line.strip(" |").split(" | ") for line in LINES.read_text().splitlines())
    return [row[1:] for row in cells if row[0] == kind]


def _line(
    row: list[str],
    mode: str,
    per_job: Mapping[str, float],
    prices: Mapping[str, float],
    **figures: Any,
) -> Line:
    component, item, figure, unit, price, basis = row
    return Line(
        mode, component, item, per_job[figure], unit, prices[price], basis.format_map(figures)
    )


def _prices(prices: Prices | None, assumptions: Assumptions | None = None) -> dict[str, float]:
    """Price field -> dollars per unit; ``lambda_gb_second`` at the assumed architecture."""
    p = prices or Prices()
    found = {f.name: getattr(p, f.name) for f in fields(p)}
    if assumptions is not None:
        found["lambda_gb_second"] = found[assumptions.gb_second_price_field]
    return found


def _measured_lines(
    measure: PipelineMeasure, a: Assumptions, prices: Mapping[str, float], mode: str, volume: str
) -> list[Line]:
    """A line per AWS call counted in the run (those priced here), per settled job."""
    jobs = max(1, measure.settled_jobs)
    measured = _measured(measure)
    calls = [
        (component, call, count / jobs, basis)
        for component, counts, basis in (
            ("processor λ", measure.processor_calls, measured),
            (
                "SQS event source",
                measure.event_source_calls,
                f"{measured} (non-empty receives, deletes)",
            ),
        )
        for call, count in sorted(counts.items())
    ]
    for call, count in sorted(measure.reconciler_calls.items()):
        if call != "dynamodb:BatchGetItem":  # priced by listed job, in the table
            per_run = count / max(1, measure.reconciler_runs)
            basis = f"measured: {per_run:g} per run, amortised at {volume}"
            calls.append(("reconciler λ", call, per_run * a.reconciler_runs_per_job, basis))
    found = [
        aws_call_line(component, call, per_job, basis, mode=mode, prices=prices, assumptions=a)
        for component, call, per_job, basis in calls
    ]
    return [line for line in found if line is not None]


def _measured(measure: PipelineMeasure) -> str:
    return f"measured: {measure.settled_jobs} settled jobs"


def pipeline_lines(
    measure: PipelineMeasure,
    assumptions: Assumptions,
    prices: Prices | None = None,
    mode: str = "webhook pipeline",
) -> list[Line]:
    """Every line of the webhook pipeline, per settled job."""
    a, m = assumptions, measure
    jobs = max(1, m.settled_jobs)
    listings = a.job_listings_per_job
    listed = a.jobs_per_month / (SECONDS_PER_MONTH / a.job_list_interval_s) * a.listed_again
    pages_per_listing = max(1, math.ceil(listed / a.jobs_page_size))
    fixed_reads_per_run = m.reconciler_fixed_reads / max(1, m.reconciler_runs)
    deliveries = m.deliveries / jobs
    outcomes = m.settled_jobs if m.outcomes is None else m.outcomes
    runs = a.reconciler_runs_per_job
    new_deliveries = (m.deliveries - m.duplicate_deliveries) / jobs
    cached = 1 / a.receiver_secret_cache_s + 1 / a.processor_secret_cache_s
    secret_reads = a.warm_containers * SECONDS_PER_MONTH * cached
    secret_reads += SECONDS_PER_MONTH / a.reconcile_interval_s
    per_job = {
        "one": 1.0,
        "job_reads": m.job_reads / jobs,
        "list_pages": pages_per_listing * listings,
        "count_checks": a.count_queries_per_listing * listings,
        "fixed_reads": fixed_reads_per_run * runs,
        "deliveries": deliveries,
        "receiver_gbs": deliveries * gb_seconds(a.lambda_memory_mb, a.receiver_ms),
        "receiver_writes": deliveries * a.write_units_per_write,
        "receiver_sends": new_deliveries * (m.receiver_calls_new - 1),
        "batches": m.processor_batches / jobs,
        "processor_gbs": gb_seconds(a.lambda_memory_mb, a.processor_ms_per_job),
        "runs": runs,
        "reconciler_gbs": runs * gb_seconds(a.lambda_memory_mb, a.reconciler_ms_per_run),
        "listed_reads": a.listed_again * a.read_units_per_read,
        "outcomes": outcomes / jobs,
        "idle_polls": a.esm_pollers * SECONDS_PER_MONTH / a.esm_wait_s / a.jobs_per_month,
        "secret_reads": secret_reads / a.jobs_per_month,
    }
    volume = f"{a.jobs_per_month:,.0f} jobs/month"
    figures = {
        "a": a,
        "m": m,
        "measured": _measured(m),
        "volume": volume,
        "pages_per_listing": pages_per_listing,
        "listings_per_million": listings * PER_MILLION,
        "fixed_reads_per_run": fixed_reads_per_run,
        "arch": "arm64" if a.arm64 else "x86",
        "batch_jobs": m.settled_jobs / max(1, m.processor_batches),
        "outcomes": outcomes,
    }
    p = _prices(prices, a)
    lines: list[Line] = []
    for row in _rows("pipeline"):
        if row[2] == "measured":
            lines += _measured_lines(m, a, p, mode, volume)
        else:
            lines.append(_line(row, mode, per_job, p, **figures))
    order = list(COMPONENT_ORDER)
    return sorted(lines, key=lambda x: order.index(x.component) if x.component in order else 99)


def poller_lines(
    mode: str,
    reads_per_job: float,
    s3_puts_per_job: float,
    prices: Prices | None = None,
    basis: str = "measured",
) -> list[Line]:
    """A poller: its submission, its polls, and the same result writes as the pipeline."""
    per_job = {"one": 1.0, "reads": reads_per_job, "s3_puts": s3_puts_per_job}
    return [_line(row, mode, per_job, _prices(prices), basis=basis) for row in _rows("poller")]


def price_text(value: float) -> str:
    """A unit price in full: ``$0.0000133334``."""
    return "$" + f"{value:.10f}".rstrip("0").rstrip(".")


def price_rows(prices: Prices | None = None) -> list[list[str]]:
    """Prices as table rows: field, unit price, as published, source, as of."""
    rows = []
    for name, value in _prices(prices).items():
        published, source = PRICE_SOURCES[name]
        rows.append([f"`{name}`", price_text(value), published, source, PRICES_AS_OF])
    return rows
