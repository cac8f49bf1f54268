"""The Geonode API client's exceptions: the network's, and one class per error status. Messages
carry the API's code, message and correlation id, never the API key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.fields import as_dict, objects, of_type


class GeonodeError(PipelineError):
    """Base of every error the client raises; ``attempts`` counts the tries made,
    ``retry_after`` the wait the API asked for (only a ``RateLimitedError`` carries one)."""

    attempts: int = 1
    retry_after: float | None = None


class MissingAPIKeyError(GeonodeError):
    """No API key was given and ``GEONODE_SCRAPER_API_KEY`` is not set."""


class TransportError(GeonodeError):
    """The network failed; ``request_sent`` says whether the API may have acted on the request."""

    def __init__(self, message: str, *, request_sent: bool) -> None:
        super().__init__(message)
        self.request_sent = request_sent


class APIError(GeonodeError):
    """An error answer from the API, read from either error shape of the contract."""

    def __init__(
        self,
        status_code: int,
        *,
        code: str | None = None,
        message: str | None = None,
        retryable: bool = False,
        correlation_id: str | None = None,
        body: Any = None,
    ) -> None:
        self.status_code, self.code, self.message = status_code, code, message
        self.retryable, self.correlation_id, self.body = retryable, correlation_id, body
        text = f"HTTP {status_code}" + (f" {code}" if code else "")
        text += f": {message}" if message else ""
        text += f" (correlation id {correlation_id})" if correlation_id else ""
        super().__init__(text)


class AuthError(APIError):
    """The API key is missing, wrong or not allowed (401/403)."""


class PaymentRequiredError(APIError):
    """The account's balance is exhausted (402)."""


class NotFoundError(APIError):
    """No such resource, or not visible yet (replica lag right after a submission)."""


class ConflictError(APIError):
    """The resource's state forbids the action (409)."""


class ValidationError(APIError):
    """The request was rejected as invalid, or the extraction itself failed (422)."""

    @property
    def detail(self) -> list[Mapping[str, Any]]:
        """FastAPI's ``detail`` items, or an empty list for the other error shape."""
        return objects(as_dict(self.body).get("detail"))


class RateLimitedError(APIError):
    """Throttled or over the concurrency limit (429); ``retry_after`` in seconds when sent."""


class ServerError(APIError):
    """The API failed (5xx)."""


# The one table from an error status to its class; any other 5xx is a ServerError.
_BY_STATUS: Final[Mapping[int, type[APIError]]] = {
    401: AuthError,
    403: AuthError,
    402: PaymentRequiredError,
    404: NotFoundError,
    409: ConflictError,
    422: ValidationError,
    429: RateLimitedError,
}
# Statuses whose failure is transient by nature, whatever the body says.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def api_error(
    status_code: int, body: Any, headers: Mapping[str, str], *, retry_after: float | None = None
) -> APIError:
    """The error an answer of ``status_code`` carries (``body``: its JSON, or None), read from
    either error shape; ``retry_after`` is kept by a ``RateLimitedError`` only."""
    fields = _error_fields(body)
    code, message = _code_and_message(body, fields)
    retryable = fields.get("retryable")
    correlation_id = (
        fields.get("correlation_id")
        or headers.get("X-Correlation-Id")
        or headers.get("X-Request-Id")
    )
    cls = ServerError if status_code >= 500 else _BY_STATUS.get(status_code, APIError)
    error = cls(
        status_code,
        code=_text(code),
        message=_text(message, 500),
        retryable=retryable if isinstance(retryable, bool) else status_code in TRANSIENT_STATUSES,
        correlation_id=str(correlation_id) if correlation_id else None,
        body=body,
    )
    if cls is RateLimitedError:
        error.retry_after = retry_after
    return error


def _error_fields(body: Any) -> Mapping[str, Any]:
    """The error object: nested under ``error`` (older examples) or the body itself."""
    nested = as_dict(body).get("error")
    return nested if isinstance(nested, Mapping) else as_dict(body)


def _code_and_message(body: Any, fields: Mapping[str, Any]) -> tuple[Any, Any]:
    """The code and message; FastAPI's ``detail`` supplies them when the body names none."""
    code, message = fields.get("code"), fields.get("message")
    detail = as_dict(body).get("detail")
    if message is not None:
        return code, message
    if isinstance(detail, list):
        return code or "VALIDATION_ERROR", _validation_message(detail)
    return code, of_type(detail, str)  # a plain-text detail, else no message at all


def _validation_message(detail: Sequence[Any]) -> str:
    """``loc.path: msg`` of each FastAPI validation item, joined by "; "."""
    return "; ".join(
        f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg', '')}" for d in objects(detail)
    )


def _text(value: Any, limit: int | None = None) -> str | None:
    return None if value is None else str(value)[:limit]
