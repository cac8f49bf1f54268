"""The Secrets Manager value's parser: a plain secret, or a JSON bundle of them.

Errors name the position, never the content: the content is the secret.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final

from scrape_pipeline.signatures.errors import SecretBundleError
from scrape_pipeline.signatures.secret import WebhookSecret, WebhookSecrets

_UNPARSABLE: Final = object()
_BUNDLE_KEYS: Final = frozenset({"secrets", "subscriptions"})
_ENTRY_KEYS: Final = frozenset({"value", "expires_at"})


def parse_secret_bundle(raw: str) -> WebhookSecrets:
    """Read a Secrets Manager value: a plain secret, or a JSON bundle (below).

        {"subscriptions": {"<webhook id>": [{"value": ..., "expires_at": ...}, ...], ...}}
        {"secrets": [{"value": ..., "expires_at": ...}, ...]}   (old: shared by all)

    Both keys may be present while an old bundle is being migrated. ``expires_at`` is an
    ISO 8601 date-time with a time zone, or null. Errors name the position, never the
    content: the content is the secret.
    """
    if not isinstance(raw, str):
        raise TypeError("the secret bundle must be a str")
    # A trailing newline sneaks in when the secret is stored from a file.
    text = raw.strip()
    if not text:
        raise SecretBundleError("the secret bundle is empty")
    if not text.startswith(("{", "[")):
        return WebhookSecrets(shared=(WebhookSecret(text),))
    document = _document(text)
    shared = _parse_secret_list(document["secrets"], "secrets") if "secrets" in document else ()
    return WebhookSecrets(_subscriptions(document), shared)


def _document(text: str) -> dict[str, Any]:
    """The bundle's JSON object, with no key beside the two known ones."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        document = _UNPARSABLE
    if document is _UNPARSABLE:
        # Raised outside the handler: the JSON error keeps the whole document in `.doc`,
        # and a chained (even suppressed) context would carry it into error reporters.
        raise SecretBundleError("the secret bundle looks like JSON but does not parse")
    if not isinstance(document, dict) or not document or not set(document) <= _BUNDLE_KEYS:
        raise SecretBundleError(
            'the secret bundle must be an object with the keys "subscriptions" and/or "secrets"'
        )
    return document


def _subscriptions(document: dict[str, Any]) -> dict[str, tuple[WebhookSecret, ...]]:
    """Each webhook id's secrets; an old bundle of shared secrets alone may have none."""
    by_id = document.get("subscriptions", {})
    if not isinstance(by_id, dict) or ("secrets" not in document and not by_id):
        raise SecretBundleError('"subscriptions" must be a non-empty object of webhook ids')
    subscriptions: dict[str, tuple[WebhookSecret, ...]] = {}
    for index, (webhook_id, entries) in enumerate(by_id.items()):
        if not webhook_id.strip():
            raise SecretBundleError(f"subscription #{index} has an empty webhook id")
        subscriptions[webhook_id] = _parse_secret_list(entries, f"subscriptions[#{index}]")
    return subscriptions


def _parse_secret_list(entries: Any, where: str) -> tuple[WebhookSecret, ...]:
    if not isinstance(entries, list) or not entries:
        raise SecretBundleError(f"{where} must be a non-empty list")
    return tuple(_parse_bundle_entry(entry, f"{where}[{i}]") for i, entry in enumerate(entries))


def _parse_bundle_entry(entry: Any, where: str) -> WebhookSecret:
    # Unknown keys are rejected: a misspelt "expire_at" would otherwise keep an old secret forever.
    if not isinstance(entry, dict) or "value" not in entry or not set(entry) <= _ENTRY_KEYS:
        raise SecretBundleError(f'{where} must be an object with "value" and optional "expires_at"')
    value = entry["value"]
    if not isinstance(value, str) or not value:
        raise SecretBundleError(f"{where}.value must be a non-empty string")
    expires = entry.get("expires_at")
    if expires is None:
        return WebhookSecret(value)
    return WebhookSecret(value, expires_at=_expiry(expires, where))


def _expiry(expires: Any, where: str) -> float:
    """Epoch seconds of an aware ISO 8601 date-time."""
    try:
        moment = datetime.fromisoformat(expires) if isinstance(expires, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        # A naive time would depend on the Lambda's TZ; insist on an explicit zone.
        raise SecretBundleError(
            f"{where}.expires_at must be an ISO 8601 date-time with a time zone, or null"
        )
    return moment.timestamp()
