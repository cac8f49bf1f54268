"""The client's HTTP core on httpx: the key, one request with its retries (``retry`` decides
them, ``Transport._send`` carries them out), and the one place httpx's errors become ours."""

from __future__ import annotations

import calendar
import email.utils
import functools
import itertools
import os
import random
import re
import ssl
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, Self

import httpx

from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.geonode.errors import (
    APIError,
    GeonodeError,
    MissingAPIKeyError,
    TransportError,
    api_error,
)
from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.geonode.settings import GEONODE_SCRAPER_API_KEY, GeonodeSettings

API_KEY_ENV: Final = GEONODE_SCRAPER_API_KEY.name
API_KEY_HEADER: Final = "X-Api-Key"
USER_AGENT: Final = "scrape-pipeline/0.1"
_READ_METHODS: Final = frozenset({"GET", "HEAD"})

DateLike = datetime | str | float


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process: each one built loads certifi's bundle (~20 ms)."""
    return httpx.create_ssl_context()


class Transport:
    """The key (``api_key`` or the environment's; never in a repr, log or error), the connection
    pool and ``_send``; ``GeonodeClient`` adds the endpoints. Thread-safe."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        settings: GeonodeSettings | None = None,
        retry: RetryPolicy = RetryPolicy(),
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        transport: httpx.BaseTransport | None = None,
        connect_timeout: float | None = None,
        refresh_key: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``refresh_key``: called on a 401 for a key read anew; a request refused with the old
        key is sent once more with a new one (a 401 did nothing)."""
        settings = settings or GeonodeSettings.from_env()
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise MissingAPIKeyError(f"no API key: pass api_key or set {API_KEY_ENV}")
        self.base_url = (base_url or settings.base_url).rstrip("/")
        self._host = httpx.URL(self.base_url).netloc.decode("ascii", "replace")
        self.retry = retry
        self._clock = clock
        self._rng = rng or random.Random()  # jitter only, not security
        self._rng_lock = threading.Lock()
        self._sent = itertools.count(1)
        # HTTP requests sent so far, retries included (what the API bills and rate-limits).
        self.requests_sent = 0
        self._refresh_key = refresh_key
        self._key_lock = threading.Lock()
        timeout = settings.timeout_seconds
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={API_KEY_HEADER: key, "User-Agent": USER_AGENT, "Accept": "application/json"},
            timeout=httpx.Timeout(timeout, connect=connect_timeout or timeout),
            transport=transport,
            verify=_tls_context(),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
    ) -> httpx.Response:
        is_read = method in _READ_METHODS
        started = self._clock.monotonic()
        attempt = 0
        key_renewed = False
        while True:
            attempt += 1
            sent_with = self._http.headers.get(API_KEY_HEADER)
            outcome = self._attempt(method, path, params, json)
            if isinstance(outcome, httpx.Response):
                return outcome
            if not key_renewed and self._renew_key(outcome, sent_with):
                key_renewed = True  # once per request: a wrong new key is not chased
                continue
            outcome.attempts = attempt
            elapsed = self._clock.monotonic() - started
            with self._rng_lock:
                wait = self.retry.wait(outcome, attempt, is_read, elapsed, self._rng)
            if wait is None:
                raise outcome
            self._clock.sleep(wait)

    def _attempt(
        self, method: str, path: str, params: Mapping[str, Any] | None, json: Any
    ) -> httpx.Response | GeonodeError:
        """One request: the successful answer, or the error it ended in (not raised)."""
        self.requests_sent = next(self._sent)
        try:
            response = self._http.request(method, path, params=params, json=json)
        except httpx.HTTPError as exc:
            error = _transport_error(exc, method, path, self._host)
            error.__cause__ = exc
            return error
        if response.is_success:
            return response
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        retry_after = _retry_after(response, self._clock.time())
        return api_error(response.status_code, body, response.headers, retry_after=retry_after)

    def _renew_key(self, error: GeonodeError, refused: str | None) -> bool:
        """After a 401 (the key ``refused``): True when another key (maybe another thread's)
        is set."""
        if getattr(error, "status_code", None) != 401:
            return False
        with self._key_lock:
            if self._http.headers.get(API_KEY_HEADER) != refused:
                return True
            key = self._refresh_key()
            if not key or key == refused:
                return False
            self._http.headers[API_KEY_HEADER] = key
            return True

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise APIError(
                response.status_code, code="INVALID_RESPONSE", message="answer is not JSON"
            ) from exc

    def _get(self, path: str, **params: Any) -> Any:
        return self._json(self._send("GET", path, params=query(**params)))

    def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._json(self._send("POST", path, json=body))


def query(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones; dates in the API's format."""
    return {
        key: format_time(value) if key.endswith("_date") and not isinstance(value, str) else value
        for key, value in values.items()
        if value is not None
    }


def _retry_after(response: httpx.Response, now: float) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date (None: neither)."""
    raw = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, calendar.timegm(when.utctimetuple()) - now)  # a date without zone: UTC


_ERRNO: Final = re.compile(r"^\[Errno -?\d+\]\s*")
_CAUSES: Final[Mapping[type[httpx.HTTPError], str]] = {
    httpx.ConnectTimeout: "no connection in time",
    httpx.ReadTimeout: "no answer in time",
    httpx.WriteTimeout: "could not send in time",
    httpx.PoolTimeout: "no free connection in time",
}


def _cause(exc: httpx.HTTPError) -> str:
    """Why the network failed, in a few words ("connection refused"), never a header."""
    # httpx repeats the socket's own words (refused, unknown name) after their errno.
    text = _CAUSES.get(type(exc)) or _ERRNO.sub("", " ".join(str(exc).split()))[:120]
    return (text[:1].lower() + text[1:]) or "no detail"


def _transport_error(exc: httpx.HTTPError, method: str, path: str, host: str) -> TransportError:
    """httpx's error as ours (``GET /v1/webhooks: cannot reach HOST: connection refused
    (ConnectError)``), saying whether the request may have been acted on."""
    # No connection was made: the API cannot have seen the request, so even a POST is safe again.
    never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    kind = type(exc).__name__
    where = f"cannot reach {host}" if never_sent else host
    return TransportError(
        f"{method} {path}: {where}: {_cause(exc)} ({kind})", request_sent=not never_sent
    )
