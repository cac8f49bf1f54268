"""Zero-downtime rotation of a webhook secret.

    1. rotate through the API          the sender signs with the new secret from now on
    2. store it in Secrets Manager     new secret current, the subscription's previous ones
                                       valid for the grace; the other subscriptions' untouched
    3. replay 401s from the log        deliveries rejected while the receiver caught up

Each subscription has a secret of its own, so the bundle keeps secrets per subscription
(``WebhookSecrets``). An old flat bundle reads as secrets shared by every subscription, which
one signs with which unknown: the first rotation gives each of the rotated subscription's
siblings (those the API lists with its URL) its own copy of the shared ones, untouched, and
the rotated one its new secret, the shared ones expiring with its grace. From then on the
bundle is per subscription; the shared secrets retire as each sibling is rotated in turn.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSUnavailableError, unavailable
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.jobs import Source
from scrape_pipeline.receiver.signatures.secret import (
    WebhookSecret,
    WebhookSecrets,
    parse_secret_bundle,
)
from scrape_pipeline.reconciler.run import Reconciler
from scrape_pipeline_ops.geonode_admin import AdminClient
from scrape_pipeline_ops.replay import replay_failed

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
    current: WebhookSecrets, webhook_id: str, new_secret: str, now: float
) -> WebhookSecrets:
    """``current`` with ``new_secret`` for ``webhook_id`` (just created, or rotated in at once).

    The subscription keeps its own still-valid secrets; the others are untouched.
    """
    own = [
        s
        for s in current.subscriptions.get(webhook_id, ())
        if s.is_active(now) and s.value != new_secret
    ]
    mine = (WebhookSecret(new_secret), *own)
    return WebhookSecrets({**current.subscriptions, webhook_id: mine}, current.shared)


def secrets_of(secrets: WebhookSecrets, webhook_id: str) -> tuple[WebhookSecret, ...]:
    """The secrets that may have signed ``webhook_id``'s deliveries: its own and the shared."""
    return (*secrets.subscriptions.get(webhook_id, ()), *secrets.shared)


def with_rotated_secret(
    current: WebhookSecrets,
    webhook_id: str,
    new_secret: str,
    *,
    started: float,
    until: float,
    siblings: Iterable[str] = (),
) -> WebhookSecrets:
    """``current`` after ``webhook_id``'s rotation: its previous secrets expire at ``until``.

    The shared secrets of an old flat bundle are among them (which one was its own is
    unknown); ``siblings``, the other subscriptions they may belong to, each get them as
    their own, unchanged, so the bundle written is per subscription.
    """
    previous = [
        WebhookSecret(s.value, expires_at=min(s.expires_at, until) if s.expires_at else until)
        for s in dict.fromkeys(secrets_of(current, webhook_id))
        if s.is_active(started) and s.value != new_secret
    ]
    changes: dict[str, tuple[WebhookSecret, ...]] = {
        webhook_id: (WebhookSecret(new_secret), *previous)
    }
    if current.shared:
        for sibling in siblings:
            if sibling != webhook_id and sibling not in current.subscriptions:
                changes[sibling] = current.shared
    return WebhookSecrets({**current.subscriptions, **changes}, shared=())


def valid_for(secrets: WebhookSecrets, webhook_id: str, now: float) -> list[WebhookSecret]:
    """``webhook_id``'s secrets still valid at ``now`` (none: its deliveries are refused)."""
    return [s for s in secrets_of(secrets, webhook_id) if s.is_active(now)]


@dataclass(frozen=True)
class BundleContents:
    """What the bundle holds: its real secrets (expired ones too), and whether the placeholder."""

    secrets: WebhookSecrets
    placeholder: bool

    def active(self, now: float) -> list[WebhookSecret]:
        """Every subscription's secrets still valid at ``now``."""
        return [s for s in self.secrets.every() if s.is_active(now)]

    def without_valid_secret(self, webhook_ids: Iterable[str], now: float) -> list[str]:
        """Those of ``webhook_ids`` whose deliveries the bundle would refuse at ``now``."""
        return [i for i in webhook_ids if not valid_for(self.secrets, i, now)]


def render_bundle(secrets: WebhookSecrets) -> str:
    """The Secrets Manager value for ``secrets`` (what ``parse_secret_bundle`` reads).

    Shared secrets (an old flat bundle not yet migrated) keep their old key, ``"secrets"``.
    """

    def when(moment: float | None) -> str | None:
        if moment is None:
            return None
        return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")

    def entries(group: Sequence[WebhookSecret]) -> list[dict[str, str | None]]:
        return [{"value": s.value, "expires_at": when(s.expires_at)} for s in group]

    document: dict[str, object] = {}
    if secrets.subscriptions:
        document["subscriptions"] = {i: entries(g) for i, g in secrets.subscriptions.items()}
    if secrets.shared or not secrets.subscriptions:
        document["secrets"] = entries(secrets.shared)
    return json.dumps(document)


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
            return BundleContents(WebhookSecrets(), placeholder=True)
        return BundleContents(parse_secret_bundle(value), placeholder=False)

    def read(self) -> WebhookSecrets:
        """The real secrets stored now (never the placeholder)."""
        return self.contents().secrets

    def write(self, secrets: WebhookSecrets) -> None:
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
    secrets_kept: int  # the subscription's previous secrets, valid for the grace
    replayed: int


def rotate_webhook_secret(
    client: AdminClient,
    webhook_id: str,
    bundle: SecretBundle,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    replay_with: Reconciler | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> RotationResult:
    """Rotate ``webhook_id``'s secret, keep its previous ones for ``grace_seconds``, replay 401s.

    The other subscriptions' secrets are untouched: they sign with their own.
    """
    if grace_seconds <= 0:
        raise ValueError("grace_seconds must be positive")
    started = clock.time()
    current = bundle.read()  # fail before rotating if the store is unreachable
    # An old flat bundle: its shared secrets go to the subscriptions that may sign with them.
    siblings = _siblings(client, webhook_id) if current.shared else []
    new_secret = client.rotate_webhook_secret(webhook_id)
    until = started + grace_seconds
    secrets = with_rotated_secret(
        current, webhook_id, new_secret, started=started, until=until, siblings=siblings
    )
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
        replayed = replay_failed(
            replay_with,
            webhook_id,
            since=started - 60.0,
            only_status=401,
            source=Source.ROTATION,
        ).recovered
    return RotationResult(
        webhook_id=webhook_id,
        started_at=started,
        previous_valid_until=until,
        secrets_kept=len(secrets.subscriptions[webhook_id]) - 1,
        replayed=replayed,
    )


def _siblings(client: AdminClient, webhook_id: str) -> list[str]:
    """The account's other subscriptions delivering where ``webhook_id`` does."""
    hooks = client.list_webhooks()
    url = next((h.url for h in hooks if h.id == webhook_id), None)
    return [h.id for h in hooks if h.url == url and h.id != webhook_id]
