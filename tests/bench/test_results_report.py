"""bench.sweep --quick and bench.latency into a temporary directory, bench.results_report drawing
them; bench.cost's arithmetic."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import cost, latency, sweep
from bench.report import RESULTS
from bench.results_report import LABELS, PNG_MAGIC, main
from tests.conftest import OFFLINE_AWS_ENV

CHARTS = ("requests_per_job.png", "latency.png", "cost_per_million.png")
# The quick report starts four local stacks and two simulators: about 45 s on an idle 2-core
# machine, twice that on a busy one; the first test pays for it in its setup.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One quick report for the whole module: pollers, pipelines, two demos, then the drawing."""
    out = tmp_path_factory.mktemp("results")
    (out / "receiver.json").write_text((RESULTS / "receiver.json").read_text())
    with pytest.MonkeyPatch.context() as env:
        for name, value in OFFLINE_AWS_ENV.items():
            env.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "GEONODE_SCRAPER_API_KEY"):
            env.delenv(name, raising=False)
        # GIVEN the quick sweep and small demos, saved in an output directory
        assert sweep.main(["--quick", "--out", str(out)]) == 0
        assert latency.main(["--jobs", "10", "--out", str(out)]) == 0
        # WHEN the report draws them
        assert main(["--results", str(out), "--out", str(out)]) == 0
    yield out


@pytest.fixture(scope="module")
def markdown(report_dir: Path) -> str:
    return (report_dir / "RESULTS.md").read_text()


def _table_after(markdown: str, heading: str) -> list[list[str]]:
    """The rows (header included) of the first table after ``heading``."""
    section = markdown.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return [row for row in rows if not all(set(c) <= {"-"} for c in row)]


def test_results_report_has_every_section(markdown: str) -> None:
    # THEN the document says what ran, when and where, and has each study
    assert markdown.startswith("# Benchmark results")
    assert re.search(r"on \d{4}-\d{2}-\d{2} \(UTC\) on \d+ CPUs", markdown)
    for heading in (
        "## What was run",
        "## Requests per job against concurrent jobs",
        "## Settle-to-stored latency of the webhook pipeline",
        "## Cost per million jobs",
        "### Lines",
        "### Assumptions",
        "### Prices",
    ):
        assert heading in markdown, heading


def test_results_report_requests_table_has_each_mode_and_job_count(markdown: str) -> None:
    rows = _table_after(markdown, "## Requests per job against concurrent jobs")
    assert rows[0] == ["mode", "3 jobs", "6 jobs"]
    assert [row[0] for row in rows[1:]] == list(LABELS.values())
    for row in rows[1:]:
        assert all(float(v) >= 1.0 for v in row[1:]), row  # one fetch per job is the floor


def test_results_report_latency_table_has_both_runs(markdown: str) -> None:
    rows = _table_after(markdown, "## Settle-to-stored latency of the webhook pipeline")
    assert rows[0][:5] == ["chaos", "stored units", "p50 (s)", "p90 (s)", "p99 (s)"]
    assert sorted(row[0] for row in rows[1:]) == ["default", "none"]
    for row in rows[1:]:
        p50, p90, p99 = (float(v.replace(",", "")) for v in row[2:5])
        assert 0 <= p50 <= p90 <= p99
        assert row[-1] == "0 / 0"  # nothing lost, nothing processed twice
    assert "differs from the demo's own" not in markdown


def test_results_report_cost_tables(markdown: str) -> None:
    rows = _table_after(markdown, "## Cost per million jobs")
    modes = [row[0] for row in rows[1:]]
    assert set(modes) == set(LABELS.values())
    totals = {row[0]: float(row[4].strip("$").replace(",", "")) for row in rows[1:]}
    assert all(total > 350 for total in totals.values())  # the submission alone is $350
    assert cost.PRICES_AS_OF in markdown
    prices = _table_after(markdown, "### Prices")
    assert len(prices) - 1 == len(cost.PRICE_SOURCES)
    assert len(_table_after(markdown, "### Assumptions")) > 5


def test_results_report_charts_are_png_and_linked(report_dir: Path, markdown: str) -> None:
    for name in CHARTS:
        path = report_dir / "charts" / name
        assert path.read_bytes()[:8] == PNG_MAGIC, name
        assert f"](charts/{name})" in markdown, name
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown):
        assert (report_dir / link).is_file(), link


# -- the cost model's arithmetic, by hand --------------------------------------------------


def test_cost_geonode_thousand_requests_is_35_cents() -> None:
    assert 1_000 * cost.Prices().geonode_request == pytest.approx(0.35)


def test_cost_line_per_million() -> None:
    # GIVEN two Geonode requests per job
    line = cost.Line("m", "Geonode", "polls", 2.0, "request", cost.Prices().geonode_request, "")
    # THEN a million jobs cost 2,000,000 x $0.00035
    assert line.per_million == pytest.approx(700.0)


def test_cost_lambda_million_invocations_of_100_ms_at_256_mb_arm64() -> None:
    prices = cost.Prices()
    assert cost.gb_seconds(256, 100) == pytest.approx(0.025)
    assert cost.gb_seconds(256, 99.2) == pytest.approx(0.025)  # billed per started ms
    # 1M x $0.20/1M + 25,000 GB-s x $0.0000133334
    dollars = 1e6 * prices.lambda_request + 1e6 * 0.025 * prices.lambda_gb_second_arm64
    assert dollars == pytest.approx(0.533335)


def test_cost_poller_lines_seed_example() -> None:
    # GIVEN a poller making 5 GETs per job and storing 2 objects per job
    lines = cost.poller_lines("seed", 5.0, 2.0)
    # THEN (1 submission + 5 polls) x $350 + 2 x $5 per million jobs
    assert cost.by_category(lines) == pytest.approx({"geonode": 2_100.0, "aws": 10.0})
    assert cost.total(lines) == pytest.approx(2_110.0)


def test_cost_pipeline_lines_small_example() -> None:
    # GIVEN 10 settled jobs, 12 deliveries of which 2 duplicates, batches of 5
    measure = cost.PipelineMeasure(
        settled_jobs=10,
        job_reads=10,
        deliveries=12,
        duplicate_deliveries=2,
        processor_batches=2,
        processor_calls={
            "dynamodb:UpdateItem": 20,
            "s3:PutObject": 20,
            "secretsmanager:GetSecretValue": 1,
        },
        event_source_calls={"sqs:ReceiveMessage": 2, "sqs:DeleteMessageBatch": 2},
        reconciler_runs=3,
        reconciler_calls={"dynamodb:Query": 9, "dynamodb:BatchGetItem": 3},
        reconciler_fixed_reads=12,
    )
    # AND the reconciler every 600 s, the job list at each run, a 120 s overlap
    every_ten_minutes = cost.Assumptions(
        reconcile_interval_s=600.0, job_list_interval_s=600.0, reconcile_overlap_s=120.0
    )
    lines = {(x.component, x.item): x for x in cost.pipeline_lines(measure, every_ten_minutes)}
    # THEN each count is divided by the settled jobs and priced per million
    assert lines[("API Gateway", "webhook deliveries")].per_million == pytest.approx(4.20)
    assert lines[("receiver λ", "sqs SendMessage")].per_million == pytest.approx(0.40)
    assert lines[("receiver λ", "dynamodb PutItem (ledger)")].per_million == pytest.approx(0.75)
    assert lines[("processor λ", "s3 PutObject")].per_million == pytest.approx(10.0)
    assert lines[("processor λ", "dynamodb UpdateItem")].per_million == pytest.approx(1.25)
    assert lines[("processor λ", "invocations")].per_million == pytest.approx(0.04)
    assert lines[("SQS event source", "sqs ReceiveMessage")].per_million == pytest.approx(0.08)
    assert lines[("Geonode", "job fetch GET /v1/extract/{id}")].per_million == pytest.approx(350)
    # reconciler: 4,320 runs per million jobs at 1M jobs a month; 4 reads per run measured
    fixed = lines[("Geonode", "reconciler subscriptions + delivery log")]
    assert fixed.per_job * 1e6 == pytest.approx(4 * 4_320)
    # 277.8 jobs listed per run (overlap included): 3 pages of 100
    pages = lines[("Geonode", "reconciler job-list pages")]
    assert pages.per_job * 1e6 == pytest.approx(3 * 4_320)
    assert lines[("reconciler λ", "dynamodb Query")].per_job * 1e6 == pytest.approx(3 * 4_320)
    # Secrets Manager by time: 43,200 + 8,640 + 4,320 calls a month for 1M jobs
    secrets = lines[("Secrets Manager", "GetSecretValue")]
    assert secrets.per_million == pytest.approx(56_160 * 0.05 / 10_000)
    assert not any(x.item.startswith("secretsmanager") for x in lines.values())
    assert ("reconciler λ", "dynamodb BatchGetItem") not in lines


def test_cost_price_rows_cover_every_price() -> None:
    rows = cost.price_rows()
    assert len(rows) == len(cost.PRICE_SOURCES)
    assert all(row[-1] == cost.PRICES_AS_OF for row in rows)
    assert rows[-1][:2] == ["`geonode_request`", "$0.00035"]
