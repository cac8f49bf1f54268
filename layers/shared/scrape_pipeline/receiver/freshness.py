"""How old a delivery may be when its signature covers no timestamp.

The default scheme signs the body only, so a capture verifies for ever: the envelope's signed
``timestamp`` must fall in the window (401 outside, 400 when absent or unreadable). A late retry
refused here is replayed from the delivery log by the reconciler, not through the receiver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from scrape_pipeline.config.settings import Kind, Setting, read_declared
from scrape_pipeline.receiver.payload import PayloadError
from scrape_pipeline.receiver.signatures.config import DEFAULT_TOLERANCE_SECONDS, SignatureConfig
from scrape_pipeline.receiver.signatures.signing import SignatureError

DEFAULT_MAX_AGE_SECONDS: Final = 36 * 3600
OFF: Final = "off"
_MAX_AGE_LIMIT: Final = 90 * 86_400  # the ledger's TTL: a longer window outlives the rows
# Beyond about 3e11 seconds datetime cannot show the year: not a time any sender stamps.
_MAX_EPOCH: Final = 10**11


class StaleDeliveryError(SignatureError):
    """Verified, but stamped outside the window: a capture replayed, or a clock far off."""

    def __init__(self, detail: str) -> None:
        super().__init__("timestamp outside tolerance", detail)


@dataclass(frozen=True)
class Freshness:
    """The window a delivery's signed timestamp must fall in; ``max_age`` None: no window."""

    max_age: int | None = Setting(
        "WEBHOOK_MAX_AGE_SECONDS",
        DEFAULT_MAX_AGE_SECONDS,
        "schemes whose signature covers no timestamp (geonode without "
        "`SIGNATURE_TIMESTAMP_HEADER`, github): the envelope's signed `timestamp` must be at most "
        "this old and at most `SIGNATURE_TOLERANCE_SECONDS` ahead, else 401 with nothing "
        "written; a body without one is a 400. 36 h covers the sender's whole retry schedule "
        "(0 s, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: 27.6 h, 33.1 h at +20 % jitter, plus "
        "eight 15 s timeouts) even if every retry keeps the event's time (the contract does not "
        "say). `off`, by name only, for a sender that stamps no time. Standard Webhooks and "
        "Stripe keep their own signed timestamp's check instead (`freshness.py`)",
        Kind.INTEGER,
        maximum=_MAX_AGE_LIMIT,
        off=OFF,
    ).field()
    max_ahead: int = DEFAULT_TOLERANCE_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str], signature: SignatureConfig) -> Freshness:
        """``WEBHOOK_MAX_AGE_SECONDS``; no window where ``signature`` checks its own timestamp."""
        max_age = read_declared(cls, env)["max_age"]
        return cls(None if signature.signs_timestamp else max_age, signature.tolerance_seconds)

    def check(self, stamp: object, now: float) -> None:
        """Return if ``stamp`` (as sent) is inside the window; ``PayloadError`` when it is absent
        or unreadable, ``StaleDeliveryError`` when outside."""
        if self.max_age is None:
            return
        if stamp is None:
            raise PayloadError("missing timestamp")
        self._judge(now - sent_at(stamp), self.max_age)

    def _judge(self, age: float, max_age: int) -> None:
        if age > max_age:
            raise StaleDeliveryError(f"more than {max_age} s old")
        if -age > self.max_ahead:
            raise StaleDeliveryError(f"more than {self.max_ahead} s in the future")


def sent_at(stamp: object) -> float:
    """Epoch seconds of an ISO 8601 date-time with a zone, or of whole epoch seconds."""
    seconds = _epoch_seconds(stamp) if isinstance(stamp, int) else _iso_seconds(stamp)
    if seconds is None:
        raise PayloadError("malformed timestamp")
    return seconds


def _epoch_seconds(stamp: int) -> float | None:
    # JSON's true and false are ints to Python, not times.
    usable = not isinstance(stamp, bool) and 0 <= stamp < _MAX_EPOCH
    return float(stamp) if usable else None


def _iso_seconds(stamp: object) -> float | None:
    if not isinstance(stamp, str) or len(stamp) > 40:
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    # A naive time would be read in the Lambda's zone: insist on the sender's. An aware one
    # is within datetime's years, so its epoch seconds are always finite.
    return moment.timestamp() if moment.tzinfo is not None else None
