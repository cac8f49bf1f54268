"""Every knob of the Geonode simulator, with the default each takes when the contract is silent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

SignatureScheme = Literal["geonode", "standard_webhooks", "stripe", "github"]
SIGNATURE_SCHEMES: tuple[str, ...] = ("geonode", "standard_webhooks", "stripe", "github")
ContentSizeModel = Literal["natural", "lognormal"]
# What a delivery's envelope ``timestamp`` shows (unpublished): the attempt's own time, or the
# event's (when the job settled), kept the same across every retry.
WebhookTimestamp = Literal["attempt", "event"]
WEBHOOK_TIMESTAMPS: tuple[str, ...] = ("attempt", "event")
CONTENT_SIZE_MODELS: tuple[str, ...] = ("natural", "lognormal")

# Svix / Standard Webhooks' published schedule: delay before each attempt, after the previous one.
DEFAULT_RETRY_SCHEDULE_S: tuple[float, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)


@dataclass(frozen=True)
class FaultSettings:
    """Initial fault levels; ``Simulator.faults`` changes them at run time."""

    drop_rate: float = 0.0  # share of webhook events never sent nor logged
    duplicate_rate: float = 0.0  # share of events that get one extra, separately logged send
    delay_min_s: float = 0.0  # extra clock delay added before every delivery attempt
    delay_max_s: float = 0.0
    reorder_window_s: float = 0.0  # attempts are held a random 0..window so they go out shuffled
    api_error_rate: float = 0.0  # share of API requests answered with api_error_status
    api_error_status: int = 503
    # Share of jobs (drawn per job id) whose GET answers 200 with a body missing ``job_id``,
    # on every call: a poison job, failing the same way whatever the processor does.
    malformed_rate: float = 0.0
    # Batch and crawl GETs answer without ``page``: the client must number pages itself.
    omit_page: bool = False


@dataclass(frozen=True)
class SimConfig:
    """Simulator configuration. Times are in clock seconds unless the name says otherwise.

    Time scaling of the API itself is the clock's job: pass a
    ``scrape_pipeline_local.clock.ScaledClock``.
    """

    seed: int = 0
    # Each key is its own account: jobs, webhooks and rate limit are kept apart.
    api_keys: tuple[str, ...] = ("sim-key-1", "sim-key-2")
    legacy_error_shape: bool = False  # nest errors as {"error": {...}} like older examples
    job_list_field: Literal["jobs", "items"] = "jobs"  # "items" is the seed article's variant
    default_processing_mode: Literal["sync", "async"] = "sync"

    # Extraction timing and outcome, drawn per job at submission.
    job_duration_distribution: Literal["uniform", "exponential"] = "uniform"
    job_duration_min_s: float = 1.0
    job_duration_max_s: float = 20.0
    queued_fraction: float = 0.25  # share of the total duration spent queued
    not_found_lag_s: float = 0.5  # GET of a new job answers 404 this long (replica lag)
    # Listing lag: a job appears in GET /v1/extract/jobs only this long after its created_at,
    # drawn per job (uniformly, from its id) in [min, max]; the not-found lag still applies.
    listing_lag_min_s: float = 0.0
    listing_lag_max_s: float = 0.0
    # The lag grows: a job created this long after the simulator began (or was reset) gets its
    # whole draw, one created at the start none, in between a share (0: every job its draw).
    listing_lag_ramp_s: float = 0.0
    # The API's clock runs this far ahead of the caller's (negative: behind). Every time it
    # shows (created_at, completed_at, webhook timestamps) and reads (date filters) is on it.
    api_clock_offset_s: float = 0.0
    retryable_failure_rate: float = 0.05
    permanent_failure_rate: float = 0.02
    # The share of batch items and crawl pages that fail retryably (None: the extract jobs'
    # rate), so a test can fail items often while their retries, extract jobs, succeed.
    item_retryable_failure_rate: float | None = None
    retryable_error_code: str = "UPSTREAM_TIMEOUT"
    permanent_error_code: str = "TARGET_BLOCKED"
    sync_timeout_s: float = 60.0  # a sync job drawn longer than this answers 504
    tokens_per_page: int = 1

    # Page size of each text format (markdown, html) a completed job returns. "natural": the
    # page's own few hundred bytes (fast tests). "lognormal": a heavy tail drawn per job, like
    # real pages; median 48 KiB and sigma 1.5 put p99 near 1.6 MB and p99.9 near 5 MB, and the
    # cap stops the rare draw beyond 8 MiB (p99.97) at what a browser-rendered page reaches.
    content_size: ContentSizeModel = "natural"
    content_size_median_bytes: int = 48 * 1024
    content_size_sigma: float = 1.5
    content_size_max_bytes: int = 8 * 1024 * 1024

    # The long tail of durations: this share of jobs, batch items and crawl pages runs for
    # hours or days (drawn uniformly in [long_job_min_s, long_job_max_s]) instead.
    long_job_rate: float = 0.0
    long_job_min_s: float = 86_400.0
    long_job_max_s: float = 172_800.0

    # Batches and crawls.
    batch_max_urls: int = 1000
    crawl_default_max_pages: int = 10
    crawl_max_pages_cap: int = 500  # a larger max_pages answers 422
    crawl_concurrency: int = 4  # pages of one crawl in flight at once
    crawl_page_duration_min_s: float = 0.5
    crawl_page_duration_max_s: float = 5.0

    # Each account's balance in tokens (None: unlimited). Every job submitted draws
    # tokens_per_page per URL (a crawl: its start page) when it is created; a POST the
    # balance cannot cover answers 402 and creates nothing. ``Simulator.top_up`` adds more.
    balance_tokens: int | None = None
    # A lost answer of "timeout" (``Faults.lose_answers``) holds the connection this long
    # (real seconds) before dropping it: longer than the client's timeout, it times out.
    lost_answer_hold_s: float = 0.0

    # Token bucket per API key, on the clock; rate 0 disables it.
    rate_limit_per_s: float = 50.0
    rate_limit_burst: int = 100

    # Webhooks.
    webhook_max_subscriptions: int = 10
    webhook_retry_schedule_s: tuple[float, ...] = DEFAULT_RETRY_SCHEDULE_S
    webhook_jitter: float = 0.2  # each delay is multiplied by uniform(1 - j, 1 + j)
    webhook_timeout_s: float = 15.0
    webhook_min_timeout_s: float = 0.05  # floor for the scaled timeout (real seconds)
    webhook_time_scale: float = 1.0  # divides the schedule and the timeout
    webhook_workers: int = 8
    webhook_poll_s: float = 0.005  # real seconds between dispatcher checks
    webhook_dispatcher: bool = True  # start the background dispatcher thread
    webhook_flat_fields: bool = False  # also put job_id, event_type, id at the envelope's top
    webhook_timestamp: WebhookTimestamp = "attempt"
    signature_scheme: SignatureScheme = "geonode"
    signature_header: str = "X-Webhook-Signature"  # geonode scheme only
    signature_prefix: str = ""  # geonode scheme only, e.g. "sha256="

    faults: FaultSettings = field(default_factory=FaultSettings)

    @property
    def item_retryable_rate(self) -> float:
        """The share of batch items and crawl pages that fail retryably."""
        item = self.item_retryable_failure_rate
        return self.retryable_failure_rate if item is None else item

    def __post_init__(self) -> None:
        if not self.api_keys:
            raise ValueError("api_keys must not be empty")
        for name in ("retryable_failure_rate", "permanent_failure_rate", "queued_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.retryable_failure_rate + self.permanent_failure_rate > 1.0:
            raise ValueError("failure rates add up to more than 1")
        if self.item_retryable_failure_rate is not None and not (
            0.0 <= self.item_retryable_failure_rate <= 1.0 - self.permanent_failure_rate
        ):
            raise ValueError("item_retryable_failure_rate must be within [0, 1 - permanent]")
        if not 0 < self.job_duration_min_s <= self.job_duration_max_s:
            raise ValueError("need 0 < job_duration_min_s <= job_duration_max_s")
        if not 0 <= self.listing_lag_min_s <= self.listing_lag_max_s:
            raise ValueError("need 0 <= listing_lag_min_s <= listing_lag_max_s")
        if self.listing_lag_ramp_s < 0:
            raise ValueError("listing_lag_ramp_s must not be negative")
        if not 0 < self.crawl_page_duration_min_s <= self.crawl_page_duration_max_s:
            raise ValueError("need 0 < crawl_page_duration_min_s <= crawl_page_duration_max_s")
        if self.signature_scheme not in SIGNATURE_SCHEMES:
            raise ValueError(f"signature_scheme must be one of {SIGNATURE_SCHEMES}")
        if not 0.0 <= self.long_job_rate <= 1.0:
            raise ValueError("long_job_rate must be within [0, 1]")
        if not 0 < self.long_job_min_s <= self.long_job_max_s:
            raise ValueError("need 0 < long_job_min_s <= long_job_max_s")
        if self.content_size not in CONTENT_SIZE_MODELS:
            raise ValueError(f"content_size must be one of {CONTENT_SIZE_MODELS}")
        if not 0 < self.content_size_median_bytes <= self.content_size_max_bytes:
            raise ValueError("need 0 < content_size_median_bytes <= content_size_max_bytes")
        if self.content_size_sigma < 0:
            raise ValueError("content_size_sigma must not be negative")
        if self.webhook_timestamp not in WEBHOOK_TIMESTAMPS:
            raise ValueError(f"webhook_timestamp must be one of {WEBHOOK_TIMESTAMPS}")
        if self.webhook_time_scale <= 0:
            raise ValueError("webhook_time_scale must be positive")
        if not self.webhook_retry_schedule_s:
            raise ValueError("webhook_retry_schedule_s must have at least one attempt")
        if self.crawl_concurrency < 1 or self.webhook_workers < 1:
            raise ValueError("crawl_concurrency and webhook_workers must be at least 1")
