"""The one place botocore's errors become ours (``errors`` draws the tree), so callers never
match on error-code strings: the runtime wraps each call in ``unavailable``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    HTTPClientError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotocoreConnectionError,
)

from scrape_pipeline.errors import PipelineError

_ERRNO: Final = re.compile(r"\[Errno -?\d+\]\s*([^\])'\"]+)")


class AWSError(PipelineError):
    """Base of the AWS failures, translated from botocore's here and nowhere else."""


class AWSUnavailableError(AWSError):
    """An AWS call failed for a reason that is not the caller's input: retry later (5xx);
    ``detail`` is AWS's own message only where a person reads it (the CLI)."""

    def __init__(self, service: str, operation: str, code: str, detail: str = "") -> None:
        super().__init__(
            f"{service} {operation} failed: {code}" + (f": {detail}" if detail else "")
        )
        self.service, self.operation, self.code, self.detail = service, operation, code, detail


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError, else the exception's class name."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


# A call that got no answer, by kind: where (never connected: "cannot reach"), and why when the
# socket's own words (refused, unknown name) are not in the wrapped urllib3 error. First match.
_NO_ANSWER: Final = (
    (ConnectTimeoutError, "cannot reach {}", "no connection in time"),
    (ReadTimeoutError, "{}", "no answer in time"),
    (BotocoreConnectionError, "cannot reach {}", "no connection"),
    (HTTPClientError, "{}", "connection lost before an answer"),
)


def network_detail(exc: BaseException) -> str:
    """Where and why a call got no answer (``cannot reach HOST: connection refused``), or "";
    ours, from the endpoint and the socket, never AWS's text, so the Lambdas may log it."""
    kwargs = getattr(exc, "kwargs", {})
    host = urlsplit(str(kwargs.get("endpoint_url", ""))).netloc or "the AWS endpoint"
    for kind, where, why in _NO_ANSWER:
        if isinstance(exc, kind):
            cause = _socket_cause(kwargs) or why
            return f"{where.format(host)}: {cause[:1].lower()}{cause[1:120]}"
    return ""


def _socket_cause(kwargs: dict[str, Any]) -> str:
    """The socket's own words (refused, unknown name) in the wrapped urllib3 error, or ""."""
    found = _ERRNO.search(str(kwargs.get("error", "")))
    return " ".join(found.group(1).split()) if found else ""


def unavailable(
    service: str, operation: str, exc: ClientError | BotoCoreError
) -> AWSUnavailableError:
    """Wrap a botocore failure (the caller raises it ``from exc``), without AWS's message."""
    return AWSUnavailableError(service, operation, error_code(exc), network_detail(exc))


AWS_ERRORS = (ClientError, BotoCoreError)
# A cancelled transaction's reason for the item whose own condition failed.
CANCELLED_BY_CONDITION = "ConditionalCheckFailed"


def _has_code(exc: BaseException, *codes: str) -> bool:
    return isinstance(exc, ClientError) and error_code(exc) in codes


# The refusals a conditional write expects are not failures but answers.
def is_condition_failed(exc: BaseException) -> bool:
    """DynamoDB refused a conditional write: its ``ConditionExpression`` did not hold."""
    return _has_code(exc, "ConditionalCheckFailedException")


def refused_item(exc: BaseException) -> dict[str, Any] | None:
    """The item a refused DynamoDB write found (``ReturnValuesOnConditionCheckFailure``)."""
    item = getattr(exc, "response", {}).get("Item") if is_condition_failed(exc) else None
    return dict(item) if item else None


def is_precondition_failed(exc: BaseException) -> bool:
    """S3 refused a conditional put (412): ``If-None-Match: *`` found an object at the key."""
    return _has_code(exc, "PreconditionFailed", "412")


def is_write_conflict(exc: BaseException) -> bool:
    """S3 refused a conditional put (409): another conditional write to the key is in flight."""
    return _has_code(exc, "ConditionalRequestConflict", "409")


def is_transaction_canceled(exc: BaseException) -> bool:
    """DynamoDB refused a ``TransactWriteItems`` as a whole (a condition, or a conflict)."""
    return _has_code(exc, "TransactionCanceledException")


def cancellation_codes(exc: BaseException, items: int) -> list[str] | None:
    """A cancelled transaction's reason per item, ``"None"`` where fine (None: no cancellation)."""
    if not is_transaction_canceled(exc):
        return None
    reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
    codes = [str(r.get("Code") or "None") for r in reasons]
    return codes + ["None"] * (items - len(codes))


def is_no_such_key(exc: BaseException) -> bool:
    """S3 has no object at the key asked for (404 when the caller may list the bucket)."""
    return _has_code(exc, "NoSuchKey", "404")


# A secret's read: (secret id, max age in seconds, force) -> its text.
Fetch = Callable[[str, float, bool], str]


def fetch_secret(secret_id: str, max_age: float, force: bool) -> str:
    """A secret's text through Powertools (here, so the API key's read loads no signatures);
    ``AWSUnavailableError`` when unavailable."""
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 - cold start

    try:
        value: Any = parameters.get_secret(secret_id, max_age=int(max_age), force_fetch=force)
    except parameters.GetParameterError as exc:
        # Powertools wraps every failure in its own error; botocore's is its context.
        cause = exc.__context__
        if isinstance(cause, AWS_ERRORS):
            raise unavailable("secretsmanager", "GetSecretValue", cause) from exc
        raise AWSUnavailableError("secretsmanager", "GetSecretValue", type(exc).__name__) from exc
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
