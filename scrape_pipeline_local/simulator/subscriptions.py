"""Webhook subscriptions per account, their secrets, and the delivery log each one keeps."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from scrape_pipeline_local.simulator.clocks import Clock
from scrape_pipeline_local.simulator.config import SimConfig
from scrape_pipeline_local.simulator.errors import ApiError
from scrape_pipeline_local.simulator.seeding import rng_for, stable_uuid
from scrape_pipeline_local.simulator.signing import new_secret

EVENT_TYPES = ("extract_completed", "batch_completed", "crawl_completed")


@dataclass(slots=True)
class Event:
    """One event owed to one subscription (dropped ones are kept for the truth log only)."""

    id: str
    event_type: str
    account: str
    job_id: str
    subscription_id: str
    created_at: float
    dropped: bool = False
    duplicated: bool = False


@dataclass(slots=True)
class Attempt:
    """One delivery attempt: a row of the delivery log."""

    delivery_id: str
    event: Event
    attempt_number: int
    duplicate: bool  # the extra send of the duplicate fault: never retried
    url: str
    sent_at: float
    dispatch_seq: int  # order in which attempts left the dispatcher
    status: str = "pending"  # pending | success | failed | abandoned
    http_status: int | None = None
    delivered_at: float | None = None
    error: str | None = None
    body_bytes: int = 0  # size on the wire: large pages make large deliveries
    secret_rotation: int = 0  # the subscription's secret that signed it: 0 the first


@dataclass(slots=True)
class Subscription:
    """A webhook subscription: one account, one event type, one URL."""

    id: str
    account: str
    url: str
    event_type: str
    description: str | None
    is_active: bool
    created_at: float
    updated_at: float
    secret: str
    rotations: int = 0
    rotated_at: list[float] = field(default_factory=list)  # when each rotation retired one
    log: list[Attempt] = field(default_factory=list)


class SubscriptionStore:
    """Subscriptions CRUD (at most ``webhook_max_subscriptions`` per account) and their logs."""

    def __init__(self, config: SimConfig, clock: Clock, lock: threading.RLock) -> None:
        self._config = config
        self._clock = clock
        self._lock = lock
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._subs: dict[str, Subscription] = {}
            self._created_per_account: dict[str, int] = {}

    def create(
        self, account: str, url: str, event_type: str, description: str | None
    ) -> Subscription:
        """A new active subscription with a fresh secret; 409 past the per-account limit."""
        with self._lock:
            owned = sum(1 for sub in self._subs.values() if sub.account == account)
            if owned >= self._config.webhook_max_subscriptions:
                raise ApiError(
                    "WEBHOOK_LIMIT_REACHED",
                    f"at most {self._config.webhook_max_subscriptions} webhooks per account",
                )
            nth = self._created_per_account.get(account, 0) + 1
            self._created_per_account[account] = nth
            sub_id = stable_uuid(self._config.seed, "webhook", account, nth)
            now = self._clock.time()
            sub = Subscription(
                id=sub_id,
                account=account,
                url=url,
                event_type=event_type,
                description=description,
                is_active=True,
                created_at=now,
                updated_at=now,
                secret=new_secret(rng_for(self._config.seed, "secret", sub_id, 0)),
            )
            self._subs[sub_id] = sub
            return sub

    def list_for(self, account: str) -> list[Subscription]:
        with self._lock:
            return [sub for sub in self._subs.values() if sub.account == account]

    def get(self, account: str | None, sub_id: str) -> Subscription:
        """The subscription, or 404 when it does not exist or belongs to another account."""
        sub = self._subs.get(sub_id)
        if sub is None or (account is not None and sub.account != account):
            raise ApiError("NOT_FOUND", f"webhook {sub_id} not found")
        return sub

    def update(self, account: str | None, sub_id: str, changes: dict[str, object]) -> Subscription:
        """Change url, description, event_type or is_active (``account`` None: any account)."""
        with self._lock:
            sub = self.get(account, sub_id)
            for name in ("url", "description", "event_type", "is_active"):
                if name in changes:
                    setattr(sub, name, changes[name])
            sub.updated_at = self._clock.time()
            return sub

    def delete(self, account: str, sub_id: str) -> None:
        with self._lock:
            self.get(account, sub_id)
            del self._subs[sub_id]

    def rotate(self, account: str, sub_id: str) -> str:
        """A new secret; the old one signs nothing from now on (no overlap on the sender side)."""
        with self._lock:
            sub = self.get(account, sub_id)
            sub.rotations += 1
            sub.secret = new_secret(rng_for(self._config.seed, "secret", sub.id, sub.rotations))
            sub.updated_at = self._clock.time()
            sub.rotated_at.append(sub.updated_at)
            return sub.secret

    def deliveries(
        self, account: str, sub_id: str, status: str | None, page: int, page_size: int
    ) -> tuple[list[Attempt], int]:
        """One page of the subscription's attempts, newest first, and the matching total."""
        with self._lock:
            sub = self.get(account, sub_id)
            rows = [a for a in reversed(sub.log) if status is None or a.status == status]
        start = (page - 1) * page_size
        return rows[start : start + page_size], len(rows)

    def find(self, sub_id: str) -> Subscription | None:
        """The subscription of any account, or None once deleted."""
        return self._subs.get(sub_id)

    def matching(self, account: str, event_type: str, at: float) -> list[Subscription]:
        """Active subscriptions of ``account`` to ``event_type`` that existed at ``at``."""
        return [
            sub
            for sub in self._subs.values()
            if sub.account == account
            and sub.event_type == event_type
            and sub.is_active
            and sub.created_at <= at
        ]
