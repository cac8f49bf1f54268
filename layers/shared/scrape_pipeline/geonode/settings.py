"""The Geonode API client's settings: apart from ``settings`` so the receiver, which calls no
API, does not load them."""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.config.settings import FromEnv, Kind, Setting, number

DEFAULT_BASE_URL = "https://scraper.geonode.io"

# The key is not part of GeonodeSettings: ``api_key`` reads one or the other.
GEONODE_SCRAPER_API_KEY = Setting(
    "GEONODE_SCRAPER_API_KEY",
    "",
    "the API key for the CLI and local runs; never logged, never in an error",
)
GEONODE_API_KEY_SECRET_ID = Setting(
    "GEONODE_API_KEY_SECRET_ID",
    "",
    "where the Lambdas read the key (Secrets Manager, cached 5 min); one of the two is required",
)


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
