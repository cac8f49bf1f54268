"""Where the CLI's settings come from, and the errors that say a setting is wrong.

    API key     --api-key  >  --api-key-secret-id  >  GEONODE_SCRAPER_API_KEY  >
                GEONODE_API_KEY_SECRET_ID (read from Secrets Manager): a flag always beats
                the environment
    base URL    --base-url  >  GEONODE_BASE_URL  >  the contract's https://scraper.geonode.io
    resources   --stack-name NAME (the CloudFormation stack's Outputs, exported as the
                variables below)  >  the variables themselves. The stack names resources,
                not the key: its GEONODE_API_KEY_SECRET_ID still ranks below a key variable

    LEDGER_TABLE_NAME  QUEUE_URL  DLQ_URL  RESULTS_BUCKET  WEBHOOK_SECRET_ID
    GEONODE_API_KEY_SECRET_ID  WEBHOOK_URL (the receiver's, for webhooks setup and doctor)

Errors: ``UsageError`` (a mistake on the command line or in the configuration: exit 2) and
``FailedError`` (the command ran and something did not work: exit 1). Neither message may
hold a secret; ``Context.redact`` scrubs every value the CLI knows to be one.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.api_key import SECRET_ID_ENV
from scrape_pipeline.geonode.client import API_KEY_ENV
from scrape_pipeline.geonode.settings import DEFAULT_BASE_URL
from scrape_pipeline_ops.geonode_admin import AdminClient
from scrape_pipeline_ops.retry_settings import RetrySettings

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline_ops.cli.output import Printer

BASE_URL_ENV = "GEONODE_BASE_URL"
CONNECT_ATTEMPTS = 2
CONNECT_TIMEOUT = 5.0  # seconds; an answer may take the whole GEONODE_TIMEOUT_SECONDS
# CloudFormation output -> the variable the Lambdas' wiring (and this CLI) reads.
STACK_OUTPUTS: dict[str, str] = {
    "WebhookUrl": "WEBHOOK_URL",
    "LedgerTableName": "LEDGER_TABLE_NAME",
    "JobQueueUrl": "QUEUE_URL",
    "JobDeadLetterQueueUrl": "DLQ_URL",
    "ResultsBucketName": "RESULTS_BUCKET",
    "EventBusName": "EVENT_BUS_NAME",
    "WebhookSecretArn": "WEBHOOK_SECRET_ID",
    "GeonodeApiKeySecretArn": SECRET_ID_ENV,
}


class CliError(Exception):
    """A failure the CLI reports as one line; ``exit_code`` is the process's status."""

    exit_code = 1


class UsageError(CliError):
    """A wrong argument, a missing setting, an unreadable input file (exit 2)."""

    exit_code = 2


class FailedError(CliError):
    """The command ran and did not fully succeed (exit 1)."""

    exit_code = 1


def stack_outputs(stack_name: str, *, client: Any = None) -> dict[str, str]:
    """The pipeline's resources from a CloudFormation stack, keyed by environment variable."""
    if client is None:
        import boto3  # noqa: PLC0415 - only when asked for a stack

        client = boto3.client("cloudformation")
    stacks = client.describe_stacks(StackName=stack_name)["Stacks"]
    if not stacks:
        raise UsageError(f"no CloudFormation stack named {stack_name!r}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    found = {env: outputs[key] for key, env in STACK_OUTPUTS.items() if outputs.get(key)}
    if not found:
        raise UsageError(f"stack {stack_name!r} has none of the pipeline's outputs")
    return found


def export_stack(
    stack_name: str, environ: MutableMapping[str, str] | None = None, *, client: Any = None
) -> dict[str, str]:
    """Read the stack's outputs and set them as environment variables (the wiring reads those)."""
    environ = os.environ if environ is None else environ
    found = stack_outputs(stack_name, client=client)
    environ.update(found)
    return found


class Context:
    """What every command needs: the parsed options, the printer, the clock, lazy clients."""

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        printer: Printer,
        clock: Clock,
        environ: MutableMapping[str, str] | None = None,
    ) -> None:
        self.args = args
        self.out = printer
        self.clock = clock
        self.environ = os.environ if environ is None else environ
        self._api_key: str | None = None
        self._client: AdminClient | None = None
        self._boto: dict[str, Any] = {}
        self._sensitive: set[str] = set()

    # -- Geonode ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API's base URL; ``UsageError`` when it is not an http(s) URL."""
        url = getattr(self.args, "base_url", None) or self.environ.get(BASE_URL_ENV)
        url = (url or DEFAULT_BASE_URL).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--base-url must be an http(s) URL, got {url!r}")
        return url

    def api_key(self) -> str:
        """The API key, from the first source set; ``UsageError`` when none is."""
        if self._api_key is None:
            flag_secret = getattr(self.args, "api_key_secret_id", None)
            key = getattr(self.args, "api_key", None)
            if not key and not flag_secret:
                key = self.environ.get(API_KEY_ENV)
            if not key:
                secret_id = flag_secret or self.environ.get(SECRET_ID_ENV)
                if not secret_id:
                    raise UsageError(
                        f"no API key: set {API_KEY_ENV}, or pass --api-key or --api-key-secret-id"
                    )
                key = self.stored_api_key(secret_id)
            self._api_key = key
            self._sensitive.add(key)
        return self._api_key

    def stored_api_key(self, secret_id: str) -> str:
        """The API key kept in Secrets Manager; ``UsageError`` when the secret is empty."""
        key = self.read_secret(secret_id).strip()
        if not key:
            raise UsageError(f"the API key secret {secret_id!r} is empty")
        return key

    def client(self, api_key: str | None = None) -> AdminClient:
        """One API client for the whole command, on the CLI's clock (``api_key``: another one).

        A connection that cannot be made is tried twice, for at most 5 s each, not for the
        whole retry deadline: at a terminal a wrong --base-url or a network down is worth
        saying at once.
        """
        if api_key is not None:
            return self._new_client(api_key)
        if self._client is None:
            self._client = self._new_client(self.api_key())
        return self._client

    def _new_client(self, api_key: str) -> AdminClient:
        retry = RetrySettings.from_env(self.environ).policy(connect_attempts=CONNECT_ATTEMPTS)
        return AdminClient(
            api_key,
            base_url=self.base_url,
            retry=retry,
            clock=self.clock,
            connect_timeout=CONNECT_TIMEOUT,
        )

    def wiring_env(self, *required: str) -> dict[str, str]:
        """The environment for ``scrape_pipeline.wiring``: this CLI's key and base URL included."""
        self.require(*required)
        env = dict(self.environ)
        env[API_KEY_ENV] = self.api_key()
        env[BASE_URL_ENV] = self.base_url
        return env

    # -- AWS -------------------------------------------------------------------------------

    def require(self, *names: str) -> dict[str, str]:
        """The named settings; ``UsageError`` naming every one that is missing."""
        missing = [n for n in names if not self.environ.get(n)]
        if missing:
            raise UsageError(
                f"missing settings: {', '.join(missing)} (set them, or pass --stack-name)"
            )
        return {n: self.environ[n] for n in names}

    def aws(self, service: str) -> Any:
        """A boto3 client, one per service per command (honours ``AWS_ENDPOINT_URL``)."""
        if service not in self._boto:
            import boto3  # noqa: PLC0415 - only commands that touch AWS pay for it

            self._boto[service] = boto3.client(service)  # type: ignore[call-overload]
        return self._boto[service]

    def read_secret(self, secret_id: str) -> str:
        """A Secrets Manager value, remembered as sensitive."""
        value = str(self.aws("secretsmanager").get_secret_value(SecretId=secret_id)["SecretString"])
        self._sensitive.add(value)
        self._sensitive.add(value.strip())
        return value

    # -- secrets never leave -----------------------------------------------------------------

    def sensitive(self, value: str | None) -> None:
        """Remember a value that must never be printed (a webhook secret just created)."""
        if value:
            self._sensitive.add(value)

    def redact(self, text: str) -> str:
        """``text`` with every known secret replaced."""
        for value in sorted(self._sensitive, key=len, reverse=True):
            if len(value) >= 4:
                text = text.replace(value, "<redacted>")
        return text

    def close(self) -> None:
        """Close the API client's connections."""
        if self._client is not None:
            self._client.close()
            self._client = None
