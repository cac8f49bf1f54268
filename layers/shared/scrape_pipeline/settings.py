"""All configuration in one place: frozen dataclasses read from the environment, with defaults.

Every value the Geonode documentation does not publish is a setting here (geonode-api.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_BASE_URL = "https://scraper.geonode.io"


def positive_number(env: Mapping[str, str], name: str, default: float) -> float:
    """``env[name]`` as a positive number, ``default`` when unset or empty; ValueError names it."""
    return _float(env, name, default)


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value


@dataclass(frozen=True)
class GeonodeSettings:
    """How to reach the Geonode Scraper API.

    | variable | default | why |
    |---|---|---|
    | GEONODE_BASE_URL | https://scraper.geonode.io | point it at the simulator locally |
    | GEONODE_TIMEOUT_SECONDS | 30 | a sync extract may render JavaScript |
    | GEONODE_RETRY_MAX_ATTEMPTS | 6 | transient errors: 429, 5xx, network |
    | GEONODE_RETRY_BASE_DELAY_SECONDS | 0.5 | first backoff ceiling, doubled each try |
    | GEONODE_RETRY_MAX_DELAY_SECONDS | 20 | cap of one backoff |
    | GEONODE_RETRY_DEADLINE_SECONDS | 60 | total time one call may spend retrying |

    The API key is not a setting: it comes from ``GEONODE_SCRAPER_API_KEY`` or a secret store.
    """

    base_url: str = DEFAULT_BASE_URL
    timeout_seconds: float = 30.0
    retry_max_attempts: int = 6
    retry_base_delay: float = 0.5
    retry_max_delay: float = 20.0
    retry_deadline: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GeonodeSettings:
        """Read the settings from ``env`` (default: the process environment)."""
        env = os.environ if env is None else env
        return cls(
            base_url=(env.get("GEONODE_BASE_URL") or DEFAULT_BASE_URL).rstrip("/"),
            timeout_seconds=_float(env, "GEONODE_TIMEOUT_SECONDS", cls.timeout_seconds),
            retry_max_attempts=_int(env, "GEONODE_RETRY_MAX_ATTEMPTS", cls.retry_max_attempts),
            retry_base_delay=_float(env, "GEONODE_RETRY_BASE_DELAY_SECONDS", cls.retry_base_delay),
            retry_max_delay=_float(env, "GEONODE_RETRY_MAX_DELAY_SECONDS", cls.retry_max_delay),
            retry_deadline=_float(env, "GEONODE_RETRY_DEADLINE_SECONDS", cls.retry_deadline),
        )
