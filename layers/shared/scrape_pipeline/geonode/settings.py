"""The Geonode API client's settings: apart from ``settings`` so the receiver, which calls no
API, does not load them."""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.config.settings import FromEnv, Kind, Setting, integer, number, text

DEFAULT_BASE_URL = "https://scraper.geonode.io"

# The key is not part of GeonodeSettings: ``api_key`` reads one or the other.
GEONODE_SCRAPER_API_KEY = text(
    "GEONODE_SCRAPER_API_KEY",
    "",
    "the API key for the CLI and local runs; never logged, never in an error",
)
GEONODE_API_KEY_SECRET_ID = text(
    "GEONODE_API_KEY_SECRET_ID",
    "",
    "where the Lambdas read the key (Secrets Manager, cached 5 min); one of the two is required",
)
# The Lambdas build their clients with retry policies of their own (wiring).
_RETRIES = "same clients as `GEONODE_RETRY_MAX_ATTEMPTS`"


# Declared here, beside the client's settings, because the submitter, the processor and the
# CLI all read it (``scrape_pipeline.geonode.listing_lag``).
LISTING_LAG_FLOOR = number(
    "GEONODE_LISTING_LAG_FLOOR_SECONDS",
    300.0,
    "the least listing lag allowed for: a POST whose answer was lost is posted again only once "
    "a job-list look-up made this long after it (or twice the lag the reconciler measured, if "
    "more) found nothing. The API lists jobs minutes late at times; waiting costs a lost "
    "answer's entry minutes, a re-post too early pays for the URL twice",
    minimum=0,
)


@dataclass(frozen=True)
class GeonodeSettings(FromEnv):
    """How to reach the Geonode Scraper API (the declarations are the documentation)."""

    base_url: str = Setting(
        "GEONODE_BASE_URL", DEFAULT_BASE_URL, "point it at the simulator locally", Kind.URL
    ).field()
    timeout_seconds: float = number(
        "GEONODE_TIMEOUT_SECONDS", 30.0, "a sync extract may render JavaScript"
    ).field()
    listing_lag_floor_s: float = LISTING_LAG_FLOOR.field()
    retry_max_attempts: int = integer(
        "GEONODE_RETRY_MAX_ATTEMPTS",
        6,
        "attempts at one API call of a client built without a retry policy of its own: the "
        "operator CLI's own calls and scripts using the library. Not the Lambdas': the processor "
        "never retries within a call (`NO_RETRY`: the job's message comes back later), and the "
        "reconciler, with the CLI commands that run it, uses `wiring.RECONCILER_RETRY`. Reads "
        "are retried after 429, 5xx and network errors, exponential with full jitter, "
        "`Retry-After` honoured; creations only when the API certainly did not act (429, no "
        "connection)",
    ).field()
    retry_base_delay: float = number(
        "GEONODE_RETRY_BASE_DELAY_SECONDS",
        0.5,
        f"the first backoff's ceiling, doubled at each retry ({_RETRIES})",
    ).field()
    retry_max_delay: float = number(
        "GEONODE_RETRY_MAX_DELAY_SECONDS", 20.0, f"the longest backoff ({_RETRIES})"
    ).field()
    retry_deadline: float = number(
        "GEONODE_RETRY_DEADLINE_SECONDS",
        60.0,
        f"the most time one call spends retrying ({_RETRIES})",
    ).field()
