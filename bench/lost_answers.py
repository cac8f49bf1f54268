"""Lost POST answers under the ``listing-lag`` chaos profile: POSTs per URL and time in doubt."""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec
from scrape_pipeline.runs.report import Event, EventKind
from scrape_pipeline_local.chaos import PROFILES
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig, SimulatorServer
from scrape_pipeline_ops.runs.sqlite import SqliteJournal

KEY = "bench-key"
ROUTE = "POST /v1/extract"


class Losing:
    """A client whose extract POSTs lose their answer at ``share`` (the job is still made)."""

    def __init__(self, inner: GeonodeClient, sim: SimulatorServer, share: float, seed: int):
        self._inner, self._sim, self._share = inner, sim, share
        self._rng = random.Random(seed)

    def submit_extract(self, url: str, **options: Any) -> Any:
        if self._rng.random() < self._share:
            self._sim.sim.faults.lose_answers(ROUTE, [self._rng.choice([504, "timeout"])])
        return self._inner.submit_extract(url, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def measure(urls: int, share: float, seed: int) -> dict[str, Any]:
    """One run's figures."""
    clock = ManualClock()
    lag = PROFILES["listing-lag"].listing_lag
    assert lag is not None
    config = SimConfig(
        seed=seed,
        api_keys=(KEY,),
        rate_limit_per_s=0,
        retryable_failure_rate=0.0,
        permanent_failure_rate=0.0,
        webhook_dispatcher=False,
        balance_tokens=None,
        listing_lag_min_s=lag[0],
        listing_lag_max_s=lag[1],
    )
    sim = SimulatorServer(config, clock).start()
    doubt: list[float] = []

    def listen(event: Event) -> None:
        if event.kind is EventKind.ADOPTED and event.entry.posted_at is not None:
            doubt.append(clock.time() - event.entry.posted_at)

    listed = [f"https://example.com/bench-lost/{seed}/{i}" for i in range(urls)]
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            GeonodeClient(
                KEY, base_url=sim.base_url, clock=clock, retry=RetryPolicy(max_attempts=3)
            ) as api,
        ):
            journal = SqliteJournal(Path(folder) / "journal.sqlite3")
            client = Losing(api, sim, share, seed)
            submitter = Submitter(journal, client, clock=clock, pace=Pace(clock), listener=listen)
            report = submitter.submit(RunSpec.of(listed, RunMode.ASYNC, {}))
            journal.close()
        posts = sim.sim.submissions()
    finally:
        sim.stop()
    per_url = Counter(posts.get(url, 0) for url in listed)
    return {
        "urls": urls,
        "lost": len(doubt),
        "posts_per_url": dict(sorted(per_url.items())),
        "complete": report.complete,
        "doubt_p50_s": round(statistics.median(doubt), 1) if doubt else None,
        "doubt_max_s": round(max(doubt), 1) if doubt else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, default=500)
    parser.add_argument("--share", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    for seed in range(1, args.seeds + 1):
        print(measure(args.urls, args.share, seed))


if __name__ == "__main__":
    main()
