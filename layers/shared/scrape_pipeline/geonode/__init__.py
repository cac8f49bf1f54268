"""Client for the Geonode Scraper API, its errors and typed results (each name re-exported
``as`` itself, the form type checkers read as deliberate)."""

from scrape_pipeline.geonode.client import GeonodeClient as GeonodeClient
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
from scrape_pipeline.geonode.retry import RetryPolicy as RetryPolicy
