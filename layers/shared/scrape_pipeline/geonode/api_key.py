"""The API key for the Lambdas: the environment's (local), else Secrets Manager's, read anew
after a 401 at most once per ``KEY_REFRESH_MIN_SECONDS`` (a wrong key costs a read per interval)."""

from __future__ import annotations

from collections.abc import Mapping

from scrape_pipeline.aws_errors import fetch_secret
from scrape_pipeline.clock import Clock
from scrape_pipeline.config.settings import SettingsError
from scrape_pipeline.geonode.client import API_KEY_ENV
from scrape_pipeline.geonode.settings import GEONODE_API_KEY_SECRET_ID

SECRET_ID_ENV = GEONODE_API_KEY_SECRET_ID.name
KEY_CACHE_SECONDS = 300
KEY_REFRESH_MIN_SECONDS = 30.0


class ApiKeyStore:
    """The key (an environment variable's, or a secret's); the secret read again on demand."""

    def __init__(self, key: str | None, secret_id: str, clock: Clock) -> None:
        self._key, self._secret_id, self._clock = key, secret_id, clock
        self._last_refresh = float("-inf")

    def key(self) -> str:
        """The key; ``AWSUnavailableError`` when Secrets Manager cannot give it."""
        return self._key or fetch_secret(self._secret_id, KEY_CACHE_SECONDS, False).strip()

    def refreshed(self) -> str | None:
        """The key read anew, or None when it was read too recently (or has no other source)."""
        now = self._clock.monotonic()
        if self._key or now - self._last_refresh < KEY_REFRESH_MIN_SECONDS:
            return None
        self._last_refresh = now
        return fetch_secret(self._secret_id, KEY_CACHE_SECONDS, True).strip()


def api_key_store(env: Mapping[str, str], *, clock: Clock) -> ApiKeyStore:
    """The key's store from ``env``; ``SettingsError`` when no source is configured."""
    secret_id = GEONODE_API_KEY_SECRET_ID.read(env)
    if not (env.get(API_KEY_ENV) or secret_id):
        raise SettingsError(
            f"set {SECRET_ID_ENV} (or {API_KEY_ENV} for local runs)",
            names=(SECRET_ID_ENV, API_KEY_ENV),
        )
    return ApiKeyStore(env.get(API_KEY_ENV), secret_id, clock)
