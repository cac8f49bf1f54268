"""bench.scale on one tiny point: the lag is measured from outside, the figures have their shape.

One job a second for three runs of a 1-minute schedule with a 30 s threshold (a preview of
settings, as ``--schedule`` and ``--env`` give): seconds, not the benchmark's minutes.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from bench import scale
from bench.scale_point import Point, Timing, bounded, run_point
from bench.scale_world import TemplateReconciler

SCHEDULE = "rate(1 minute)"
OVERRIDES = {"RECONCILE_THRESHOLD_SECONDS": "30"}
TIMING = Timing(runs=3, step=5.0, tail_runs=3, real_rate_max=10.0)
DROP_SOME = 0.2
INTERVAL = 60.0
pytestmark = pytest.mark.timeout(240)


def _point(*, reconcile: bool, drop: float = 1.0) -> dict[str, Any]:
    template = TemplateReconciler.read(SCHEDULE)
    return run_point(
        Point(rate=1.0, drop=drop),
        template,
        TIMING,
        seed=5,
        overrides=OVERRIDES,
        reconcile=reconcile,
    )


def test_scale_template_reconciler_comes_from_the_template() -> None:
    # GIVEN the template as it is
    # WHEN the benchmark reads its reconciler
    template = TemplateReconciler.read()
    # THEN the schedule, timeout and knobs are the deployed function's, not the benchmark's
    assert template.schedule.startswith("rate(")
    assert template.interval > 0
    assert template.timeout > 0
    assert "RECONCILE_THRESHOLD_SECONDS" in template.env


def test_scale_lag_grows_when_nothing_recovers_dropped_webhooks() -> None:
    # GIVEN every webhook dropped and the reconciler not running
    # WHEN jobs settle for three scheduled slots
    figures = _point(reconcile=False)
    # THEN the lag, read from outside, grows by about a slot each time
    lags = figures["lag"]
    assert len(lags) == TIMING.runs
    assert all(later > earlier + INTERVAL / 2 for earlier, later in itertools.pairwise(lags))
    assert figures["recovered"] == 0
    assert figures["geonode_per_1000"]["reconciler"] == {}


def test_scale_point_recovers_every_dropped_job_and_reports_its_figures(tmp_path: Path) -> None:
    # GIVEN every webhook dropped and the reconciler on its schedule
    # WHEN jobs settle for three runs, then runs go on until all are in the pipeline
    figures = _point(reconcile=True)
    # THEN every settled job reached the pipeline and was stored
    assert figures["jobs"] > 0
    assert figures["dropped_jobs"] == figures["jobs"]
    assert figures["dropped_not_stored"] == 0
    assert figures["recovered"] == figures["jobs"]
    # AND the lag after each run stays near the threshold, never a slot behind
    assert max(figures["lag"]) < INTERVAL + float(OVERRIDES["RECONCILE_THRESHOLD_SECONDS"])
    assert figures["settle_to_stored"]["p50"] <= figures["settle_to_stored"]["p99"]
    # AND calls are counted per part: the reconciler's reads and writes, the pipeline's
    assert figures["geonode_per_1000"]["reconciler"]["GET /v1/extract/jobs"] > 0
    assert "GET /v1/extract/{job_id}" not in figures["geonode_per_1000"]["reconciler"]
    assert figures["aws_per_1000"]["reconciler"]["sqs:SendMessageBatch"] > 0
    assert figures["aws_per_1000"]["pipeline"]["s3:PutObject"] > 0
    assert figures["aws_per_1000"]["event_source"]["sqs:ReceiveMessage"] > 0
    # AND the document renders, and a second save replaces its section rather than adding one
    document = _document(figures)
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# Benchmark results\n\nearlier sections\n")
    scale.save(document, tmp_path / "scale.json", results_md)
    scale.save(document, tmp_path / "scale.json", results_md)
    text = results_md.read_text()
    assert text.startswith("# Benchmark results\n\nearlier sections\n")
    assert text.count(scale.HEADING) == 1
    assert (tmp_path / "charts" / scale.CHART).read_bytes().startswith(b"\x89PNG")


def test_scale_point_stores_the_last_runs_recoveries_before_it_ends() -> None:
    # GIVEN a share of webhooks dropped: the last run recovers a partial batch
    # WHEN the point ends
    figures = _point(reconcile=True, drop=DROP_SOME)
    # THEN every dropped job was stored, none left in the event source's batching window
    assert figures["dropped_jobs"] > 0
    assert figures["dropped_not_stored"] == 0


def test_scale_bounded_judges_the_second_half() -> None:
    # GIVEN lags that settle, lags that grow a slot a run, and too few runs
    # THEN only the settled series is bounded, and too few runs are not judged
    assert bounded([10, 80, 90, 85, 90, 88, 86, 90], INTERVAL) is True
    assert bounded([10, 80, 140, 200, 260, 320, 380, 440], INTERVAL) is False
    assert bounded([10, 80, 90], INTERVAL) is None


def _document(point: dict[str, Any]) -> dict[str, Any]:
    return scale.build_document(
        TemplateReconciler.read(SCHEDULE),
        OVERRIDES,
        [point],
        runs=TIMING.runs,
        tail_runs=TIMING.tail_runs,
        wall=1.0,
        preview=True,
        load_start=[0.5, 0.4, 0.3],
    )
