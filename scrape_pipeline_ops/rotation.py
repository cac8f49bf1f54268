"""Zero-downtime rotation of a webhook secret.

    1. rotate through the API          the sender signs with the new secret from now on
    2. store it in Secrets Manager     new secret current, previous ones valid for the grace
    3. replay 401s from the log        deliveries rejected while the receiver caught up

The receiver reads the bundle with a short cache and refreshes once when nothing matches,
so it accepts the new secret at once, without a restart. The new secret is shown by the API
only once: storing it is retried, and if it still fails the error says so (never the value).

Until the operator stores a real secret, the stack's bundle holds the placeholder that
CloudFormation generated (template.yaml, ``WebhookSecret``: 48 letters and digits, not JSON).
No sender signs with it, so ``SecretBundle`` never returns it: the first real secret stored
replaces it instead of joining it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSUnavailableError, unavailable
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.jobs import SOURCE_ROTATION
from scrape_pipeline.reconciler import Reconciler, ReconcileReport
from scrape_pipeline.signatures import WebhookSecret, parse_secret_bundle

if TYPE_CHECKING:
    from types_boto3_secretsmanager.client import SecretsManagerClient

DEFAULT_GRACE_SECONDS = 86_400.0
# template.yaml's WebhookSecret: GenerateSecretString, PasswordLength 48, ExcludePunctuation.
PLACEHOLDER_LENGTH = 48
STORE_ATTEMPTS = 5


class SecretNotStoredError(Exception):
    """The API rotated the secret but storing it failed: rotate again to recover."""


def is_placeholder(raw: str) -> bool:
    """Whether a stored value is the stack's generated placeholder (a ``whsec_`` secret has a _)."""
    text = raw.strip()
    return len(text) == PLACEHOLDER_LENGTH and text.isascii() and text.isalnum()


def with_new_secret(
    current: Sequence[WebhookSecret], new_secret: str, now: float
) -> list[WebhookSecret]:
    """``current``'s still-valid secrets, and ``new_secret`` (a subscription's, just created)."""
    kept = [s for s in current if s.is_active(now) and s.value != new_secret]
    return [*kept, WebhookSecret(new_secret)]


@dataclass(frozen=True)
class BundleContents:
    """What the bundle holds: its real secrets (expired ones too), and whether the placeholder."""

    secrets: list[WebhookSecret]
    placeholder: bool

    def active(self, now: float) -> list[WebhookSecret]:
        """The secrets still valid at ``now``."""
        return [s for s in self.secrets if s.is_active(now)]


def render_bundle(secrets: Sequence[WebhookSecret]) -> str:
    """The Secrets Manager value for a list of secrets (what ``parse_secret_bundle`` reads)."""

    def when(moment: float | None) -> str | None:
        if moment is None:
            return None
        return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")

    return json.dumps(
        {"secrets": [{"value": s.value, "expires_at": when(s.expires_at)} for s in secrets]}
    )


class SecretBundle:
    """The webhook secret bundle in Secrets Manager."""

    def __init__(self, secret_id: str, *, client: SecretsManagerClient | None = None) -> None:
        if client is None:
            import boto3  # noqa: PLC0415 - only when no client is injected

            client = boto3.client("secretsmanager")
        self.secret_id = secret_id
        self._sm = client

    def contents(self) -> BundleContents:
        """The secrets stored now, the placeholder set apart; ``SecretBundleError`` if malformed."""
        try:
            value = self._sm.get_secret_value(SecretId=self.secret_id)["SecretString"]
        except AWS_ERRORS as exc:
            raise unavailable("secretsmanager", "GetSecretValue", exc) from exc
        if is_placeholder(value):
            return BundleContents([], placeholder=True)
        return BundleContents(parse_secret_bundle(value), placeholder=False)

    def read(self) -> list[WebhookSecret]:
        """The real secrets stored now (never the placeholder)."""
        return self.contents().secrets

    def write(self, secrets: Sequence[WebhookSecret]) -> None:
        """Replace the stored secrets."""
        try:
            self._sm.put_secret_value(SecretId=self.secret_id, SecretString=render_bundle(secrets))
        except AWS_ERRORS as exc:
            raise unavailable("secretsmanager", "PutSecretValue", exc) from exc


@dataclass(frozen=True)
class RotationResult:
    """What a rotation did (never the secret itself)."""

    webhook_id: str
    started_at: float
    previous_valid_until: float
    secrets_kept: int
    replayed: int


def rotate_webhook_secret(
    client: GeonodeClient,
    webhook_id: str,
    bundle: SecretBundle,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    replay_with: Reconciler | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> RotationResult:
    """Rotate ``webhook_id``'s secret, keep the previous ones for ``grace_seconds``, replay 401s."""
    if grace_seconds <= 0:
        raise ValueError("grace_seconds must be positive")
    started = clock.time()
    current = bundle.read()  # fail before rotating if the store is unreachable
    new_secret = client.rotate_webhook_secret(webhook_id)
    until = started + grace_seconds
    kept = [
        WebhookSecret(s.value, expires_at=min(s.expires_at, until) if s.expires_at else until)
        for s in current
        if s.is_active(started) and s.value != new_secret
    ]
    secrets = [WebhookSecret(new_secret), *kept]
    for attempt in range(STORE_ATTEMPTS):
        try:
            bundle.write(secrets)
            break
        except AWSUnavailableError as exc:
            if attempt == STORE_ATTEMPTS - 1:
                raise SecretNotStoredError(
                    f"webhook {webhook_id} was rotated but its new secret could not be stored "
                    f"({exc.code}); rotate it again once Secrets Manager is reachable"
                ) from exc
            clock.sleep(2.0**attempt)
    replayed = 0
    if replay_with is not None:
        # A little before the start: a 401 logged just as the API switched still counts.
        replayed = replay_with.replay_failed(
            webhook_id,
            since=started - 60.0,
            report=ReconcileReport(),
            only_status=401,
            source=SOURCE_ROTATION,
        )
    return RotationResult(
        webhook_id=webhook_id,
        started_at=started,
        previous_valid_until=until,
        secrets_kept=len(kept),
        replayed=replayed,
    )
