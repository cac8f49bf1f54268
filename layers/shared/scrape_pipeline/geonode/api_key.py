"""The API key for the Lambdas: the environment's (local), else Secrets Manager's, read anew
after a 401 at most once per ``KEY_REFRESH_MIN_SECONDS`` (a wrong key costs a read per interval)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from scrape_pipeline.aws_errors import Fetch, fetch_secret
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.config.settings import SettingsError
from scrape_pipeline.geonode.client import API_KEY_ENV
from scrape_pipeline.geonode.settings import GEONODE_API_KEY_SECRET_ID

SECRET_ID_ENV = GEONODE_API_KEY_SECRET_ID.name
KEY_CACHE_SECONDS = 300
KEY_REFRESH_MIN_SECONDS = 30.0


class ApiKeyStore:
    """The key, read once; read again on demand, never more often than the interval allows."""

    def __init__(
        self,
        secret_id: str | None,
        *,
        key: str | None = None,
        min_refresh_interval: float = KEY_REFRESH_MIN_SECONDS,
        fetch: Fetch | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """``secret_id`` None: ``key`` is the only key there is (an environment variable)."""
        self.secret_id = secret_id
        self._key = key
        self._min_refresh_interval = min_refresh_interval
        self._last_refresh = float("-inf")
        self._fetch = fetch or fetch_secret
        self._clock = clock

    def key(self) -> str:
        """The key; ``AWSUnavailableError`` when Secrets Manager cannot give it."""
        if self._key is None:
            self._key = self._read(force=False)
        return self._key

    def refreshed(self) -> str | None:
        """The key read anew, or None when it was read too recently (or has no other source)."""
        now = self._clock.monotonic()
        if self.secret_id is None or now - self._last_refresh < self._min_refresh_interval:
            return None
        self._last_refresh = now
        self._key = self._read(force=True)
        return self._key

    def _read(self, *, force: bool) -> str:
        assert self.secret_id is not None  # a store without a secret was given its key
        return self._fetch(self.secret_id, KEY_CACHE_SECONDS, force).strip()


def api_key_store(
    env: Mapping[str, str] | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> ApiKeyStore:
    """The key's store from the environment; ``SettingsError`` when no source is configured."""
    env = os.environ if env is None else env
    if env.get(API_KEY_ENV):
        return ApiKeyStore(None, key=env[API_KEY_ENV], clock=clock)
    secret_id = GEONODE_API_KEY_SECRET_ID.read(env)
    if not secret_id:
        raise SettingsError(
            f"set {SECRET_ID_ENV} (or {API_KEY_ENV} for local runs)",
            names=(SECRET_ID_ENV, API_KEY_ENV),
        )
    return ApiKeyStore(secret_id, clock=clock)
