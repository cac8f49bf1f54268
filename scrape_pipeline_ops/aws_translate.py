"""botocore's failures for a person to read: the CLI's one translation, AWS's message included
(the Lambdas log ``aws_errors.unavailable``'s, which leaves it out)."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)

from scrape_pipeline.aws_errors import AWSError, AWSUnavailableError, error_code, network_detail

_CONFIGURATION = (NoRegionError, NoCredentialsError, PartialCredentialsError)


class AWSConfigurationError(AWSError):
    """boto3 has no region or no credentials to call AWS with (the CLI: exit 2)."""


def translate(exc: ClientError | BotoCoreError) -> AWSError:
    """Any botocore failure as ours, AWS's message included (for a person to read)."""
    if isinstance(exc, _CONFIGURATION):
        return AWSConfigurationError(f"AWS configuration: {exc}")
    if isinstance(exc, ClientError):
        detail = str(exc.response.get("Error", {}).get("Message") or "")
        return AWSUnavailableError("AWS", exc.operation_name, error_code(exc), detail)
    # A BotoCoreError: the network's host and cause, else its text, which names what failed.
    return AWSUnavailableError("AWS", "call", error_code(exc), network_detail(exc) or str(exc))
