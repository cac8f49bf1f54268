"""The receiver's webhook secrets, cached off the hot path; one forced refresh when none matches
lets a secret just rotated verify at once, without a restart."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from scrape_pipeline.aws_errors import Fetch, fetch_secret
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.receiver.signatures.secret import WebhookSecret, parse_secret_bundle


@dataclass
class SecretStore:
    """Cached access to the bundle of every subscription's webhook secrets."""

    secret_id: str
    _: KW_ONLY
    max_age: float = 60.0
    # Forged requests must not turn into one Secrets Manager call each.
    min_refresh_interval: float = 5.0
    fetch: Fetch = fetch_secret
    clock: Clock = SYSTEM_CLOCK
    _last_refresh: float = field(default=float("-inf"), init=False)
    # Parsed secrets and when read: the hot path skips the provider's cache and the parse.
    _cached: tuple[float, list[WebhookSecret]] | None = field(default=None, init=False)
    # The secrets last handed out were just read: a refresh would read the same bundle.
    _just_read: bool = field(default=False, init=False)

    def secrets(self) -> list[WebhookSecret]:
        """Every subscription's secrets, to try, from the cache when fresh enough."""
        now = self.clock.monotonic()
        if self._cached is not None and now - self._cached[0] < self.max_age:
            self._just_read = False
            return self._cached[1]
        return self._load(now)

    def _load(self, now: float) -> list[WebhookSecret]:
        # Past Powertools' cache (aged on the system clock, not ours): this one is the only one.
        secrets = parse_secret_bundle(self.fetch(self.secret_id, self.max_age, True)).every()
        self._cached = (now, secrets)
        self._just_read = True
        return secrets

    def refreshed(self) -> list[WebhookSecret] | None:
        """The secrets read anew; None when they were just read, or refreshed too recently."""
        now = self.clock.monotonic()
        if self._just_read or now - self._last_refresh < self.min_refresh_interval:
            return None
        self._last_refresh = now
        return self._load(now)
