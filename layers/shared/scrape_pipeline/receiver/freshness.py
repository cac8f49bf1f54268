"""How old a delivery may be when its signature covers no timestamp (a capture would verify
for ever); a late retry refused here is replayed from the delivery log by the reconciler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from scrape_pipeline.config.settings import Kind, Setting, read_declared
from scrape_pipeline.receiver.payload import PayloadError
from scrape_pipeline.receiver.signatures.config import DEFAULT_TOLERANCE_SECONDS, SignatureConfig
from scrape_pipeline.receiver.signatures.secret import aware_time
from scrape_pipeline.receiver.signatures.signing import SignatureError, outside

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
        "at +20 % jitter (33.1 h, docs/geonode-api.md) even if every retry keeps the event's "
        "time. `off`, by name only, for a sender that stamps no time",
        Kind.INTEGER,
        minimum=1,
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
        if self.max_age is not None and (
            late := outside(now - sent_at(stamp), self.max_age, self.max_ahead)
        ):
            raise StaleDeliveryError(late)


def sent_at(stamp: object) -> float:
    """Epoch seconds of an ISO 8601 date-time with a zone, or of whole epoch seconds."""
    if stamp is None:
        raise PayloadError("missing timestamp")
    # JSON's true and false are ints to Python (bools), not times.
    if type(stamp) is int and 0 <= stamp < _MAX_EPOCH:
        return float(stamp)
    if (moment := aware_time(stamp)) is None:
        raise PayloadError("malformed timestamp")
    return moment
