"""Client for the Geonode Scraper API, its errors and typed results."""

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import (
    APIError,
    AuthError,
    ConflictError,
    GeonodeError,
    JobTimeoutError,
    MissingAPIKeyError,
    NotFoundError,
    PaymentRequiredError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from scrape_pipeline.geonode.models import (
    BatchItem,
    BatchStatus,
    CrawlCancel,
    Delivery,
    ExtractResult,
    Job,
    JobSummary,
    Page,
    SubmittedJob,
    Webhook,
)
from scrape_pipeline.geonode.retry import RetryPolicy

__all__ = [
    "APIError",
    "AuthError",
    "BatchItem",
    "BatchStatus",
    "ConflictError",
    "CrawlCancel",
    "Delivery",
    "ExtractResult",
    "GeonodeClient",
    "GeonodeError",
    "Job",
    "JobSummary",
    "JobTimeoutError",
    "MissingAPIKeyError",
    "NotFoundError",
    "Page",
    "PaymentRequiredError",
    "RateLimitedError",
    "RetryPolicy",
    "ServerError",
    "SubmittedJob",
    "TransportError",
    "ValidationError",
    "Webhook",
]
