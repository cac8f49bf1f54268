"""Signing secrets with their rotation grace, and the stored bundle that holds them: errors
name a position in the bundle, never its content (the content is the secret)."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any, Final, cast

from scrape_pipeline.errors import PipelineError


class SecretBundleError(PipelineError, ValueError):
    """The stored secret bundle is malformed; the message names the position, never the content."""


@dataclass(frozen=True, repr=False)
class WebhookSecret:
    """One signing secret; ``expires_at`` (epoch seconds) ends its rotation grace, which covers
    our cached copy and the deliveries already signed with it (in flight, or retried)."""

    value: str
    expires_at: float | None = None

    def __post_init__(self) -> None:
        _check(self, _SECRET_RULES, ValueError)

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

    def every(self) -> list[WebhookSecret]:
        """Every secret once, unexpiring first: the receiver tries them all, because the body
        that names the subscription is parsed only after the signature is verified."""
        unique = dict.fromkeys(chain(*self.subscriptions.values(), self.shared))
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
        _check(webhook_id, _WEBHOOK_ID_RULES, where=f"#{index}")
        parsed[webhook_id] = _secret_list(entries, f"subscriptions[#{index}]")
    return WebhookSecrets(parsed, shared)


def _document(text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        document = _UNPARSABLE
    # Checked outside the handler: the JSON error keeps the whole document (the secret) in
    # `.doc`, and a chained context would carry it into error reporters.
    _check(document, _DOCUMENT_RULES)
    return cast("dict[str, Any]", document)


def _secret_list(entries: Any, where: str) -> tuple[WebhookSecret, ...]:
    _check(entries, _LIST_RULES, where=where)
    return tuple(_secret(entry, f"{where}[{i}]") for i, entry in enumerate(entries))


def _secret(entry: Any, where: str) -> WebhookSecret:
    _check(entry, _ENTRY_RULES, where=where)
    expires = entry.get("expires_at")
    return WebhookSecret(entry["value"], None if expires is None else _expiry(expires, where))


def _expiry(expires: Any, where: str) -> float:
    if (moment := aware_time(expires)) is None:
        raise SecretBundleError(
            f"{where}.expires_at must be an ISO 8601 date-time with a time zone, or null"
        )
    return moment


def aware_time(text: object) -> float | None:
    """Epoch seconds of an ISO 8601 date-time with a zone, else None: a naive one would be read
    in the Lambda's zone (an aware one is within datetime's years, so always finite)."""
    if not isinstance(text, str) or len(text) > 40:  # no date-time is longer
        return None
    with contextlib.suppress(ValueError):
        moment = datetime.fromisoformat(text)
        return moment.timestamp() if moment.tzinfo is not None else None
    return None


def _check(
    part: Any, rules: _Rules, error: type[ValueError] = SecretBundleError, where: str = ""
) -> None:
    """Raise ``error`` with the message of the first rule ``part`` breaks."""
    if (message := first_broken(part, rules)) is not None:
        raise error(message.format(where=where))


def first_broken[T, M](part: T, rules: Iterable[tuple[Callable[[T], bool], M]]) -> M | None:
    """What the first rule ``part`` breaks says (each rule assumes those before hold), or None."""
    return next((says for broken, says in rules if broken(part)), None)


_Rules = tuple[tuple[Callable[[Any], bool], str], ...]
_UNPARSABLE: Final = object()
_BUNDLE_KEYS: Final = frozenset({"secrets", "subscriptions"})
_ENTRY_KEYS: Final = frozenset({"value", "expires_at"})
_SECRET_RULES: Final[_Rules] = (
    # An empty HMAC key is a valid key that anyone can use.
    (lambda s: not _text(s.value), "a webhook secret must be a non-empty string"),
    # NaN would compare False against every `now`; a bool is not a time.
    (
        lambda s: s.expires_at is not None and not finite(s.expires_at),
        "expires_at must be finite epoch seconds or None",
    ),
)
_DOCUMENT_RULES: Final[_Rules] = (
    (lambda d: d is _UNPARSABLE, "the secret bundle looks like JSON but does not parse"),
    (
        lambda d: not isinstance(d, dict) or not d or not set(d) <= _BUNDLE_KEYS,
        'the secret bundle must be an object with the keys "subscriptions" and/or "secrets"',
    ),
)
_WEBHOOK_ID_RULES: Final[_Rules] = (
    (lambda webhook_id: not webhook_id.strip(), "subscription {where} has an empty webhook id"),
)
_LIST_RULES: Final[_Rules] = (
    (lambda e: not isinstance(e, list) or not e, "{where} must be a non-empty list"),
)
# Unknown keys are refused: a misspelt "expire_at" would otherwise keep an old secret forever.
_ENTRY_RULES: Final[_Rules] = (
    (
        lambda e: not isinstance(e, dict) or not set(e) <= _ENTRY_KEYS or not _text(e.get("value")),
        '{where} must be an object with a non-empty "value" and optional "expires_at"',
    ),
)


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def finite(value: object) -> bool:
    """A real number of seconds: not NaN nor infinite, nor a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
