"""The demo's audit, CLI and stdout on small workloads. Its path end to end with default chaos
(nothing lost, nothing twice) is proven on `make demo`'s own run: test_readme_demo_sample.py."""

from __future__ import annotations

import json
import subprocess
import sys

import boto3
import pytest

from scrape_pipeline_local.demo import Demo, Report, main


class TamperedDemo(Demo):
    """The demo, with the bucket changed between the judge's look and the audit's: one stored
    result's metadata.json deleted, another's written a second time."""

    def _measure(self, report: Report) -> None:
        super()._measure(report)
        assert self.stack.resources is not None
        s3, bucket = boto3.client("s3"), self.stack.resources.bucket
        (gone, _), (again, _) = report.stored_units[:2]
        s3.delete_object(Bucket=bucket, Key=gone.result_key)
        s3.put_object(Bucket=bucket, Key=again.result_key, Body=b"{}")
        self.tampered = (gone, again)


def test_the_demo_fails_naming_the_units_the_audit_judges_unlike_the_judge():
    # GIVEN a run whose bucket loses one result and doubles another after the judge saw it
    demo = TamperedDemo(jobs=20, chaos="none", seed=5)
    # WHEN the run ends with the audit
    report = demo.run()
    gone, again = demo.tampered
    # THEN the judge saw nothing wrong, and the audit finds both, by name
    assert (report.lost, report.processed_twice) == (0, 0)
    assert report.audit is not None
    assert report.audit.counts()["missing"] == 1 and report.audit.counts()["doubled"] == 1
    assert report.audit_failed
    named = " ".join(report.audit_differences)
    assert f"{gone.job_id}" in named and "judge stored, audit missing" in named
    assert f"{again.job_id}" in named and "audit doubled, judge not twice" in named
    # AND the report's audit rows say so
    rows = dict(report.lines())
    assert (rows["AUDIT: MISSING"], rows["AUDIT: DOUBLED"]) == ("1", "1")
    assert rows["AUDIT DISAGREES WITH THE JUDGE"] == "2"


def test_demo_rejects_tiny_workload(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--jobs", "3"])
    assert info.value.code == 2
    assert "--jobs must be at least 10" in capsys.readouterr().err


def test_demo_stdout_is_the_report_alone(tmp_path):
    # One 20-job run proves main's exit code, its report's rows and what stdout holds.
    # GIVEN the demo as `make demo` runs it: its own process, the functions' log in a file
    log = tmp_path / "functions.log"
    args = ["--jobs", "20", "--chaos", "none", "--seed", "2", "--function-log", str(log)]
    # WHEN it runs a small workload
    done = subprocess.run(
        [sys.executable, "-m", "scrape_pipeline_local.demo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # THEN stdout holds the report and nothing the functions printed
    assert done.returncode == 0, done.stderr
    assert "LOST" in done.stdout and "PROCESSED TWICE" in done.stdout
    assert "Geonode requests per settled job" in done.stdout
    assert "AWS calls per settled job" in done.stdout
    assert "audit of the window (API and S3)" in done.stdout and "AUDIT: MISSING" in done.stdout
    assert [line for line in done.stdout.splitlines() if line.lstrip().startswith("{")] == []
    assert "No application metrics to publish" not in done.stdout + done.stderr
    # and the functions' EMF records went to their log, each with its function's service
    services = {
        json.loads(line).get("service")
        for line in log.read_text().splitlines()
        if line.startswith('{"_aws"')
    }
    assert services == {"receiver", "processor", "reconciler"}
