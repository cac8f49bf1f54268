"""What each failed POST means for its entry: the classification table, case by case."""

from __future__ import annotations

import pytest

from scrape_pipeline.geonode.errors import GeonodeError, TransportError, api_error
from scrape_pipeline.runs.report import Verdict, classify


def _answer(status: int, retry_after: float | None = None) -> GeonodeError:
    body = {"code": "X", "message": "why", "retryable": status >= 500}
    return api_error(status, body, {}, retry_after=retry_after)


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (_answer(429, 3.0), Verdict.NOT_ACTED),
        (_answer(408), Verdict.NOT_ACTED),
        (TransportError("refused", request_sent=False), Verdict.NOT_ACTED),
        (_answer(402), Verdict.OUT_OF_BALANCE),
        (_answer(401), Verdict.UNAUTHORIZED),
        (_answer(403), Verdict.UNAUTHORIZED),
        (_answer(422), Verdict.REJECTED),
        (_answer(400), Verdict.REJECTED),
        (_answer(409), Verdict.REJECTED),
        (_answer(500), Verdict.IN_DOUBT),
        (_answer(502), Verdict.IN_DOUBT),
        (_answer(504), Verdict.IN_DOUBT),
        (_answer(202), Verdict.IN_DOUBT),  # answered, but the client could not read it
        (TransportError("no answer in time", request_sent=True), Verdict.IN_DOUBT),
    ],
    ids=lambda v: v.value if isinstance(v, Verdict) else type(v).__name__,
)
def test_outcomes_classify(error: GeonodeError, verdict: Verdict):
    assert classify(error).verdict is verdict


def test_outcomes_keep_the_api_reason_and_retry_after():
    outcome = classify(_answer(429, 3.0))
    assert outcome.retry_after == 3.0 and outcome.reason == "HTTP 429 X: why"
    assert classify(_answer(402)).verdict.stops_run
    assert not classify(_answer(422)).verdict.stops_run
