"""The one place botocore's errors become ours, so callers never match on error-code strings."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError


class AWSUnavailableError(Exception):
    """An AWS call failed for a reason that is not the caller's input: retry later (5xx)."""

    def __init__(self, service: str, operation: str, code: str) -> None:
        super().__init__(f"{service} {operation} failed: {code}")
        self.service = service
        self.operation = operation
        self.code = code


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError, else the exception's class name."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


def unavailable(
    service: str, operation: str, exc: ClientError | BotoCoreError
) -> AWSUnavailableError:
    """Wrap a botocore failure; the caller raises it ``from exc``."""
    return AWSUnavailableError(service, operation, error_code(exc))


AWS_ERRORS = (ClientError, BotoCoreError)
