"""Client for the Geonode Scraper API, its errors and typed results.

Each name is re-exported ``as`` itself, the form type checkers read as deliberate.
"""

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import APIError as APIError
from scrape_pipeline.geonode.errors import AuthError as AuthError
from scrape_pipeline.geonode.errors import ConflictError as ConflictError
from scrape_pipeline.geonode.errors import GeonodeError as GeonodeError
from scrape_pipeline.geonode.errors import JobTimeoutError as JobTimeoutError
from scrape_pipeline.geonode.errors import MissingAPIKeyError as MissingAPIKeyError
from scrape_pipeline.geonode.errors import NotFoundError as NotFoundError
from scrape_pipeline.geonode.errors import PaymentRequiredError as PaymentRequiredError
from scrape_pipeline.geonode.errors import RateLimitedError as RateLimitedError
from scrape_pipeline.geonode.errors import ServerError as ServerError
from scrape_pipeline.geonode.errors import TransportError as TransportError
from scrape_pipeline.geonode.errors import ValidationError as ValidationError
from scrape_pipeline.geonode.models import ApiStatus as ApiStatus
from scrape_pipeline.geonode.models import BatchItem as BatchItem
from scrape_pipeline.geonode.models import BatchStatus as BatchStatus
from scrape_pipeline.geonode.models import CrawlCancel as CrawlCancel
from scrape_pipeline.geonode.models import Delivery as Delivery
from scrape_pipeline.geonode.models import ExtractResult as ExtractResult
from scrape_pipeline.geonode.models import Job as Job
from scrape_pipeline.geonode.models import JobSummary as JobSummary
from scrape_pipeline.geonode.models import Page as Page
from scrape_pipeline.geonode.models import SubmittedJob as SubmittedJob
from scrape_pipeline.geonode.models import Webhook as Webhook
from scrape_pipeline.geonode.retry import RetryPolicy

__all__ = [
    "APIError",
    "ApiStatus",
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
