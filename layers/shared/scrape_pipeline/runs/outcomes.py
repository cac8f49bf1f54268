"""What a failed POST means for its entry: not acted on (posted again), refused, or in doubt
(the answer lost after sending: looked up, never re-posted blind)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from scrape_pipeline.geonode.errors import APIError, GeonodeError, TransportError


class Verdict(StrEnum):
    """What a POST's failure says about whether the API acted on it."""

    NOT_ACTED = "not_acted"
    OUT_OF_BALANCE = "out_of_balance"
    UNAUTHORIZED = "unauthorized"
    REJECTED = "rejected"
    IN_DOUBT = "in_doubt"

    @property
    def stops_run(self) -> bool:
        """The next POST would fail the same way: the run stops, its entries left planned."""
        return self in (Verdict.OUT_OF_BALANCE, Verdict.UNAUTHORIZED)


# The 4xx answers that are not a rejection of this POST (408: the request was never read).
_BY_STATUS: Final[Mapping[int, Verdict]] = {
    401: Verdict.UNAUTHORIZED,
    402: Verdict.OUT_OF_BALANCE,
    403: Verdict.UNAUTHORIZED,
    408: Verdict.NOT_ACTED,
    429: Verdict.NOT_ACTED,
}


@dataclass(frozen=True)
class Outcome:
    """A verdict, the reason kept on the entry, and the wait the API asked for (seconds)."""

    verdict: Verdict
    reason: str
    retry_after: float | None = None


def classify(error: GeonodeError) -> Outcome:
    """The outcome of a POST that raised ``error``."""
    if isinstance(error, TransportError):
        verdict = Verdict.IN_DOUBT if error.request_sent else Verdict.NOT_ACTED
        return Outcome(verdict, str(error))
    if not isinstance(error, APIError):
        return Outcome(Verdict.IN_DOUBT, str(error))
    return Outcome(_verdict(error.status_code), _reason(error), error.retry_after)


def _verdict(status: int) -> Verdict:
    """A 2xx the client could not read or a 5xx: the API may have acted."""
    if status < 400 or status >= 500:
        return Verdict.IN_DOUBT
    return _BY_STATUS.get(status, Verdict.REJECTED)


def _reason(error: APIError) -> str:
    """``HTTP 422 VALIDATION_ERROR: url: ...``."""
    text = f"HTTP {error.status_code}" + (f" {error.code}" if error.code else "")
    return f"{text}: {error.message}" if error.message else text
