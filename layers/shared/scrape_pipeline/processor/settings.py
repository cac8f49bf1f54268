"""The processor's settings: each field is its declaration (``config.settings``)."""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.config.settings import FromEnv, Kind, Setting, integer, number


@dataclass(frozen=True)
class ProcessorSettings(FromEnv):
    """The processor's knobs."""

    lease_seconds: float = number(
        "LEASE_SECONDS", 120.0, "a processor's lease; longer than its timeout"
    ).field()
    max_resubmissions_per_url: int = integer(
        "MAX_RESUBMISSIONS_PER_URL",
        2,
        "resubmissions per chain of failed attempts of one submission (a job someone else "
        "submitted starts a chain), so a chain that keeps failing ends; counted only once the "
        "API has answered with the new job, so a POST that failed spends nothing",
    ).field()
    # Independent failures at rate p poison a healthy job with probability p**8: 3e-6 per job
    # at the chaos matrix's 20 % crash rate.
    max_attempts: int = integer(
        "MAX_ATTEMPTS",
        8,
        "attempts at a job that raised or were killed (timeout, crash) before it is "
        "dead-lettered with its last error (`JobsPoisoned`, alarm); clean releases (not "
        "settled, throttled, an outage) do not count. At most this many GETs per poison job",
    ).field()
    retry_base_seconds: float = number(
        "RETRY_BASE_SECONDS", 15.0, "the first wait for a job not settled yet, doubled each time"
    ).field()
    retry_max_seconds: float = number(
        "RETRY_MAX_SECONDS",
        600.0,
        "the longest wait for a job not settled yet; below `STALE_AFTER_SECONDS`",
    ).field()
    watch_after_seconds: float = number(
        "WATCH_AFTER_SECONDS",
        1800.0,
        "a job unsettled this long is parked WATCHING instead of polled, woken by its webhook "
        "or the watch sweep (one the sweep woke that still runs is parked again at once)",
    ).field()
    not_found_max_tries: int = integer(
        "NOT_FOUND_MAX_TRIES",
        6,
        "404s before a job nothing proves exists is dead-lettered as unknown (later evidence "
        "reopens it). A job known from a verified webhook, the job list, a submission or the "
        "delivery log is never closed on 404: its 404s count toward `SICK_AFTER_FAILURES`",
    ).field()
    sick_after_failures: int = integer(
        "SICK_AFTER_FAILURES",
        6,
        "failed calls in a row for one job (5xx, timeouts, 404s of a proven job; about eight "
        "minutes of doubling waits) before it is parked WATCHING (`JobsParkedSick`, alarm); the "
        "watch sweep then polls it at half the age of its failing run, at most hourly",
    ).field()
    throttle_default_seconds: float = number(
        "THROTTLE_DEFAULT_SECONDS", 30.0, "wait after a 429 without `Retry-After`"
    ).field()
    stop_margin_seconds: float = number(
        "STOP_MARGIN_SECONDS",
        10.0,
        "the processor starts no job and reads no further batch page this close to its deadline "
        "(at most a quarter of the invocation); a batch or crawl goes on from its checkpoint",
    ).field()
    retryable_item_codes: tuple[str, ...] = Setting(
        "RETRYABLE_ITEM_CODES",
        ("UPSTREAM_TIMEOUT", "RATE_LIMITED"),  # those the API's extract jobs mark retryable
        "a batch's or crawl's item failed with one of these `error_code`s (or flagged "
        "`retryable`) is resubmitted as an extract job linked to it, within "
        "`MAX_RESUBMISSIONS_PER_URL`, instead of dead-lettered",
        Kind.LIST,
    ).field()
    event_linger_seconds: float = number(
        "EVENT_LINGER_SECONDS",
        0.0,
        "outcome events short of a full PutEvents call (ten) wait in the warm processor until "
        "ten are due or the oldest has waited this long (else the outbox sweep sends them); 0 "
        "sends every batch's at its end. At most 30, below `OUTBOX_GRACE_SECONDS` (90)",
        minimum=0.0,
    ).field()
    max_receive_count: int = integer(
        "MAX_RECEIVE_COUNT",
        5,
        "the queue's redrive count: near it, a job to retry later is re-sent instead, so a "
        "throttled job never lands in the DLQ",
    ).field()
