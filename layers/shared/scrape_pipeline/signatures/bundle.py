"""The Secrets Manager value's parser: a plain secret, or a JSON bundle of them.

Errors name the position, never the content: the content is the secret.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, NamedTuple, cast

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
    # Checked outside the handler: the JSON error keeps the whole document in `.doc`, and a
    # chained (even suppressed) context would carry it into error reporters.
    _check(_DOCUMENT_RULES, document)
    return cast("dict[str, Any]", document)


def _subscriptions(document: dict[str, Any]) -> dict[str, tuple[WebhookSecret, ...]]:
    """Each webhook id's secrets; an old bundle of shared secrets alone may have none."""
    _check(_SUBSCRIPTIONS_RULES, document)
    subscriptions: dict[str, tuple[WebhookSecret, ...]] = {}
    for index, (webhook_id, entries) in enumerate(document.get("subscriptions", {}).items()):
        _check(_WEBHOOK_ID_RULES, webhook_id, f"#{index}")
        subscriptions[webhook_id] = _parse_secret_list(entries, f"subscriptions[#{index}]")
    return subscriptions


def _parse_secret_list(entries: Any, where: str) -> tuple[WebhookSecret, ...]:
    _check(_LIST_RULES, entries, where)
    return tuple(_parse_bundle_entry(entry, f"{where}[{i}]") for i, entry in enumerate(entries))


def _parse_bundle_entry(entry: Any, where: str) -> WebhookSecret:
    _check(_ENTRY_RULES, entry, where)
    expires = entry.get("expires_at")
    return WebhookSecret(entry["value"], None if expires is None else _expiry(expires, where))


def _expiry(expires: Any, where: str) -> float:
    """Epoch seconds of an aware ISO 8601 date-time."""
    try:
        moment = datetime.fromisoformat(expires)
    except (TypeError, ValueError):  # TypeError: not a string
        moment = None
    if moment is None or moment.tzinfo is None:
        # A naive time would depend on the Lambda's TZ; insist on an explicit zone.
        raise SecretBundleError(
            f"{where}.expires_at must be an ISO 8601 date-time with a time zone, or null"
        )
    return moment.timestamp()


# --- the bundle's shape: tables of rules; the first one broken is raised --------------------


class _Rule(NamedTuple):
    """``broken`` says whether a part of the bundle breaks it; ``message`` is formatted with
    ``where``, the part's position (never its content)."""

    broken: Callable[[Any], bool]
    message: str


def _check(rules: tuple[_Rule, ...], part: object, where: str = "") -> None:
    """Raise ``SecretBundleError`` with the message of the first rule ``part`` breaks."""
    for rule in rules:
        if rule.broken(part):
            raise SecretBundleError(rule.message.format(where=where))


_DOCUMENT_RULES: Final = (
    _Rule(lambda d: d is _UNPARSABLE, "the secret bundle looks like JSON but does not parse"),
    _Rule(
        lambda d: not isinstance(d, dict) or not d or not set(d) <= _BUNDLE_KEYS,
        'the secret bundle must be an object with the keys "subscriptions" and/or "secrets"',
    ),
)
_SUBSCRIPTIONS_RULES: Final = (
    _Rule(
        lambda d: (
            not isinstance(d.get("subscriptions", {}), dict)
            or not (d.get("subscriptions") or "secrets" in d)
        ),
        '"subscriptions" must be a non-empty object of webhook ids',
    ),
)
_WEBHOOK_ID_RULES: Final = (
    _Rule(
        lambda webhook_id: not webhook_id.strip(), "subscription {where} has an empty webhook id"
    ),
)
_LIST_RULES: Final = (
    _Rule(lambda e: not isinstance(e, list) or not e, "{where} must be a non-empty list"),
)
# Unknown keys are rejected: a misspelt "expire_at" would otherwise keep an old secret forever.
_ENTRY_RULES: Final = (
    _Rule(
        lambda e: not isinstance(e, dict) or "value" not in e or not set(e) <= _ENTRY_KEYS,
        '{where} must be an object with "value" and optional "expires_at"',
    ),
    _Rule(
        lambda e: not isinstance(e["value"], str) or not e["value"],
        "{where}.value must be a non-empty string",
    ),
)
