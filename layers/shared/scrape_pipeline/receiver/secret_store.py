"""The receiver's webhook secrets, cached off the hot path; one forced refresh when none matches
lets a secret just rotated verify at once, without a restart."""

from __future__ import annotations

from scrape_pipeline.aws_errors import Fetch, fetch_secret
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.receiver.signatures.secret import WebhookSecret, parse_secret_bundle


class SecretStore:
    """Cached access to the bundle of every subscription's webhook secrets."""

    def __init__(
        self,
        secret_id: str,
        *,
        max_age: float = 60.0,
        min_refresh_interval: float = 5.0,
        fetch: Fetch = fetch_secret,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.secret_id = secret_id
        self._max_age = max_age
        # Forged requests must not turn into one Secrets Manager call each.
        self._min_refresh_interval = min_refresh_interval
        self._last_refresh = float("-inf")
        self._fetch = fetch
        self._clock = clock
        # Parsed secrets and when read: the hot path skips the provider's cache and the parse.
        self._cached: tuple[float, list[WebhookSecret]] | None = None
        # The secrets last handed out were just read: a refresh would read the same bundle.
        self._just_read = False

    def secrets(self) -> list[WebhookSecret]:
        """Every subscription's secrets, to try, from the cache when fresh enough."""
        now = self._clock.monotonic()
        if self._cached is not None and now - self._cached[0] < self._max_age:
            self._just_read = False
            return self._cached[1]
        return self._load(now)

    def _load(self, now: float) -> list[WebhookSecret]:
        # Past Powertools' cache (aged on the system clock, not ours): this one is the only one.
        secrets = parse_secret_bundle(self._fetch(self.secret_id, self._max_age, True)).every()
        self._cached = (now, secrets)
        self._just_read = True
        return secrets

    def refreshed(self) -> list[WebhookSecret] | None:
        """The secrets read anew; None when they were just read, or refreshed too recently."""
        now = self._clock.monotonic()
        if self._just_read or now - self._last_refresh < self._min_refresh_interval:
            return None
        self._last_refresh = now
        return self._load(now)
