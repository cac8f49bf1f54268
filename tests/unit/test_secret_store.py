"""The receiver's secret cache: fresh reads are bounded, whatever arrives."""

from __future__ import annotations

import json

from scrape_pipeline.receiver.secret_store import SecretStore
from scrape_pipeline_local.clock import ManualClock


def bundle(value: str) -> str:
    return json.dumps({"secrets": [{"value": value, "expires_at": None}]})


def test_secret_store_caches_then_rereads_after_max_age():
    clock = ManualClock()
    calls: list[bool] = []

    def fetch(secret_id: str, max_age: float, force: bool) -> str:
        calls.append(force)
        return bundle("whsec_a")

    store = SecretStore("id", max_age=60, fetch=fetch, clock=clock)
    for _ in range(100):
        assert [s.value for s in store.secrets()] == ["whsec_a"]
    clock.advance(61)
    store.secrets()
    # each read goes past Powertools' cache: this cache is the only one
    assert calls == [True, True]


def test_secret_store_forced_refresh_at_most_once_per_interval():
    # GIVEN a flood of forged deliveries, each asking for a forced refresh
    clock = ManualClock()
    calls: list[bool] = []
    value = {"now": "whsec_old"}

    def fetch(secret_id: str, max_age: float, force: bool) -> str:
        calls.append(force)
        return bundle(value["now"])

    store = SecretStore("id", max_age=60, min_refresh_interval=5, fetch=fetch, clock=clock)
    store.secrets()
    # (a refresh right after a read would read the same bundle: none happens)
    assert store.refreshed() is None
    store.secrets()  # the next delivery, from the cache
    value["now"] = "whsec_new"
    first = store.refreshed()
    later = [store.refreshed() for _ in range(50)]
    # THEN one forced read happened, and it updated the cache
    assert first is not None and [s.value for s in first] == ["whsec_new"]
    assert later == [None] * 50
    assert len(calls) == 2
    assert [s.value for s in store.secrets()] == ["whsec_new"]
    clock.advance(5)
    assert store.refreshed() is not None
    assert len(calls) == 3
