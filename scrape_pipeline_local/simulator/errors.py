"""API errors and their one rendering, in the current or the legacy (nested) shape.

ApiError            any non-2xx answer the simulator decides on itself
"""

from __future__ import annotations

from starlette.responses import JSONResponse

# Codes used by the simulator, with their HTTP status and whether a retry may succeed.
CODES: dict[str, tuple[int, bool]] = {
    "BAD_REQUEST": (400, False),
    "UNAUTHORIZED": (401, False),
    "PAYMENT_REQUIRED": (402, False),
    "NOT_FOUND": (404, False),
    "METHOD_NOT_ALLOWED": (405, False),
    "CONFLICT": (409, False),
    "WEBHOOK_LIMIT_REACHED": (409, False),
    "VALIDATION_ERROR": (422, False),
    "RATE_LIMITED": (429, True),
    "INTERNAL_ERROR": (500, True),
    "BAD_GATEWAY": (502, True),
    "SERVICE_UNAVAILABLE": (503, True),
    "SYNC_TIMEOUT": (504, True),
    "GATEWAY_TIMEOUT": (504, True),
}
STATUS_CODES = {
    400: "BAD_REQUEST", 401: "UNAUTHORIZED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT", 429: "RATE_LIMITED", 500: "INTERNAL_ERROR", 502: "BAD_GATEWAY",
    503: "SERVICE_UNAVAILABLE", 504: "GATEWAY_TIMEOUT",
}  # fmt: skip


class ApiError(Exception):
    """An error answer: ``status``, ``code``, ``message``, ``retryable`` and extra headers."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        default_status, default_retryable = CODES.get(code, (500, True))
        self.code = code
        self.message = message
        self.status = default_status if status is None else status
        self.retryable = default_retryable if retryable is None else retryable
        self.headers = headers or {}

    @classmethod
    def for_status(cls, status: int, message: str) -> ApiError:
        """The error the simulator gives for a bare HTTP status (faults, routing)."""
        code = STATUS_CODES.get(status, "INTERNAL_ERROR" if status >= 500 else "BAD_REQUEST")
        return cls(code, message, status=status, retryable=status >= 500 or status == 429)


def error_response(error: ApiError, correlation_id: str, *, legacy: bool) -> JSONResponse:
    """The JSON answer for ``error``: flat by default, ``{"error": {...}}`` in the legacy shape."""
    body = {
        "code": error.code,
        "message": error.message,
        "correlation_id": correlation_id,
        "retryable": error.retryable,
    }
    headers = {**error.headers, "X-Correlation-Id": correlation_id}
    return JSONResponse({"error": body} if legacy else body, error.status, headers=headers)
