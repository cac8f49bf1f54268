"""The Geonode API key for the Lambdas: the environment when set (local), else Secrets Manager."""

from __future__ import annotations

import os
from collections.abc import Mapping

from scrape_pipeline.geonode.client import API_KEY_ENV
from scrape_pipeline.settings import SettingsError, read_str

SECRET_ID_ENV = "GEONODE_API_KEY_SECRET_ID"  # noqa: S105 - a variable name, not a secret
KEY_CACHE_SECONDS = 300


def load_api_key(env: Mapping[str, str] | None = None) -> str:
    """The key; ``SettingsError`` when neither source is configured."""
    env = os.environ if env is None else env
    if env.get(API_KEY_ENV):
        return env[API_KEY_ENV]
    secret_id = read_str(env, SECRET_ID_ENV, "")
    if not secret_id:
        raise SettingsError(
            f"set {SECRET_ID_ENV} (or {API_KEY_ENV} for local runs)",
            names=(SECRET_ID_ENV, API_KEY_ENV),
        )
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 - cold start

    value = parameters.get_secret(secret_id, max_age=KEY_CACHE_SECONDS)
    key = value.decode() if isinstance(value, bytes) else str(value)
    return key.strip()
