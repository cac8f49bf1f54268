"""A signing secret with its rotation grace period, and the stored bundle of them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True, repr=False)
class WebhookSecret:
    """One signing secret; ``expires_at`` (epoch seconds) ends its rotation grace period.

    Geonode's rotate-secret switches the sender at once, but the receiver's
    cached copy and the deliveries already signed (in flight, or being retried)
    switch later: keeping the previous secret until ``expires_at`` bridges that.
    """

    value: str
    expires_at: float | None = None

    def __post_init__(self) -> None:
        for broken, message in _SECRET_RULES:
            if broken(self):
                raise ValueError(message)

    def is_active(self, now: float) -> bool:
        """True until ``expires_at``; the expiry instant itself is expired (as JWT ``exp``)."""
        return self.expires_at is None or now < self.expires_at

    def __repr__(self) -> str:
        return f"WebhookSecret(value=<redacted>, expires_at={self.expires_at!r})"


def _finite_number(value: object) -> bool:
    """A real int or float (a bool is not a time) that is neither NaN nor infinite."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


# What a secret must hold, checked when it is made: the first broken is the ValueError.
_SECRET_RULES: Final[tuple[tuple[Callable[[WebhookSecret], bool], str], ...]] = (
    # An empty HMAC key is a valid key that anyone can use.
    (
        lambda s: not isinstance(s.value, str) or not s.value,
        "a webhook secret must be a non-empty string",
    ),
    # NaN would compare False against every `now` and never expire.
    (
        lambda s: s.expires_at is not None and not _finite_number(s.expires_at),
        "expires_at must be finite epoch seconds or None",
    ),
)


@dataclass(frozen=True)
class WebhookSecrets:
    """The stored bundle: each subscription's secrets by webhook id, and secrets shared by all.

    Each subscription has its own secret at Geonode, so a rotation retires one subscription's
    previous secret only. ``shared`` is what an old flat bundle held: one list for every
    subscription, which one signs with which unknown; the next rotation gives each
    subscription its own copy (``scrape_pipeline_ops.rotation``).
    """

    subscriptions: Mapping[str, tuple[WebhookSecret, ...]] = field(default_factory=dict)
    shared: tuple[WebhookSecret, ...] = ()

    def of(self, webhook_id: str) -> tuple[WebhookSecret, ...]:
        """The secrets that may have signed ``webhook_id``'s deliveries: its own and the shared."""
        return (*self.subscriptions.get(webhook_id, ()), *self.shared)

    def valid_for(self, webhook_id: str, now: float) -> list[WebhookSecret]:
        """``webhook_id``'s secrets still valid at ``now`` (none: its deliveries are refused)."""
        return [s for s in self.of(webhook_id) if s.is_active(now)]

    def every(self) -> list[WebhookSecret]:
        """Every subscription's secrets once each, the current (unexpiring) ones first.

        The receiver tries them all: the subscription that sent a delivery is named only in
        the body, which is parsed after the signature is verified, never before.
        """
        unique = dict.fromkeys(
            [*(s for group in self.subscriptions.values() for s in group), *self.shared]
        )
        return sorted(unique, key=lambda s: s.expires_at is not None)
