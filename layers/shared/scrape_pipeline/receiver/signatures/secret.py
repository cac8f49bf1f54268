"""Signing secrets with their rotation grace, and the stored bundle that holds them: errors
name a position in the bundle, never its content (the content is the secret)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from scrape_pipeline.errors import PipelineError

_BUNDLE_KEYS: Final = frozenset({"secrets", "subscriptions"})
_ENTRY_KEYS: Final = frozenset({"value", "expires_at"})


class SecretBundleError(PipelineError, ValueError):
    """The stored secret bundle is malformed; the message names the position, never the content."""


@dataclass(frozen=True, repr=False)
class WebhookSecret:
    """One signing secret; ``expires_at`` (epoch seconds) ends its rotation grace, which covers
    our cached copy and the deliveries already signed with it (in flight, or retried)."""

    value: str
    expires_at: float | None = None

    def __post_init__(self) -> None:
        if not _is_text(self.value):  # an empty HMAC key is a valid key that anyone can use
            raise ValueError("a webhook secret must be a non-empty string")
        if not (self.expires_at is None or _finite(self.expires_at)):
            # NaN would compare False against every `now`; a bool is not a time.
            raise ValueError("expires_at must be finite epoch seconds or None")

    def is_active(self, now: float) -> bool:
        """True until ``expires_at``; the expiry instant itself is expired (as JWT ``exp``)."""
        return self.expires_at is None or now < self.expires_at

    def __repr__(self) -> str:
        return f"WebhookSecret(value=<redacted>, expires_at={self.expires_at!r})"


@dataclass(frozen=True)
class WebhookSecrets:
    """Each subscription's secrets by webhook id, and ``shared``: an old flat bundle's list for
    every subscription, split per subscription by the next rotation (``scrape_pipeline_ops``)."""

    subscriptions: Mapping[str, tuple[WebhookSecret, ...]] = field(default_factory=dict)
    shared: tuple[WebhookSecret, ...] = ()

    def of(self, webhook_id: str) -> tuple[WebhookSecret, ...]:
        """The secrets that may have signed ``webhook_id``'s deliveries: its own and the shared."""
        return (*self.subscriptions.get(webhook_id, ()), *self.shared)

    def valid_for(self, webhook_id: str, now: float) -> list[WebhookSecret]:
        """``webhook_id``'s secrets still valid at ``now`` (none: its deliveries are refused)."""
        return [s for s in self.of(webhook_id) if s.is_active(now)]

    def every(self) -> list[WebhookSecret]:
        """Every secret once, unexpiring first: the receiver tries them all, because the body
        that names the subscription is parsed only after the signature is verified."""
        unique = dict.fromkeys(
            [*(s for group in self.subscriptions.values() for s in group), *self.shared]
        )
        return sorted(unique, key=lambda s: s.expires_at is not None)


def parse_secret_bundle(raw: str) -> WebhookSecrets:
    """A plain secret, or ``{"subscriptions": {"<webhook id>": [{"value", "expires_at"}]}}``
    and/or the old shared ``{"secrets": [...]}``; ``expires_at`` is ISO 8601 with a zone, or null.
    """
    if not isinstance(raw, str):
        raise TypeError("the secret bundle must be a str")
    text = raw.strip()  # a trailing newline sneaks in when the secret is stored from a file
    if not text:
        raise SecretBundleError("the secret bundle is empty")
    if not text.startswith(("{", "[")):
        return WebhookSecrets(shared=(WebhookSecret(text),))
    return _bundle(_document(text))


def _bundle(document: dict[str, Any]) -> WebhookSecrets:
    subscriptions = document.get("subscriptions", {})
    if not isinstance(subscriptions, dict) or not (subscriptions or "secrets" in document):
        raise SecretBundleError('"subscriptions" must be a non-empty object of webhook ids')
    shared = _secret_list(document["secrets"], "secrets") if "secrets" in document else ()
    parsed: dict[str, tuple[WebhookSecret, ...]] = {}
    for index, (webhook_id, entries) in enumerate(subscriptions.items()):
        if not webhook_id.strip():
            raise SecretBundleError(f"subscription #{index} has an empty webhook id")
        parsed[webhook_id] = _secret_list(entries, f"subscriptions[#{index}]")
    return WebhookSecrets(parsed, shared)


def _document(text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        document = None
    # Raised outside the handler: the JSON error keeps the whole document (the secret) in
    # `.doc`, and a chained context would carry it into error reporters.
    if document is None:
        raise SecretBundleError("the secret bundle looks like JSON but does not parse")
    if not isinstance(document, dict) or not document or not set(document) <= _BUNDLE_KEYS:
        raise SecretBundleError(
            'the secret bundle must be an object with the keys "subscriptions" and/or "secrets"'
        )
    return document


def _secret_list(entries: Any, where: str) -> tuple[WebhookSecret, ...]:
    if not isinstance(entries, list) or not entries:
        raise SecretBundleError(f"{where} must be a non-empty list")
    return tuple(_secret(entry, f"{where}[{i}]") for i, entry in enumerate(entries))


def _secret(entry: Any, where: str) -> WebhookSecret:
    # Unknown keys are refused: a misspelt "expire_at" would otherwise keep an old secret forever.
    if not (isinstance(entry, dict) and set(entry) <= _ENTRY_KEYS and _is_text(entry.get("value"))):
        raise SecretBundleError(
            f'{where} must be an object with a non-empty "value" and optional "expires_at"'
        )
    expires = entry.get("expires_at")
    return WebhookSecret(entry["value"], None if expires is None else _expiry(expires, where))


def _expiry(expires: Any, where: str) -> float:
    try:
        moment = datetime.fromisoformat(expires)
    except (TypeError, ValueError):  # TypeError: not a string
        moment = None
    if moment is None or moment.tzinfo is None:  # a naive time would depend on the Lambda's TZ
        raise SecretBundleError(
            f"{where}.expires_at must be an ISO 8601 date-time with a time zone, or null"
        )
    return moment.timestamp()


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _finite(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
