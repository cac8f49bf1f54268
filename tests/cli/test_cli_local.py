"""``local up``: the whole pipeline on a real (sped-up) clock, with its background threads."""

from __future__ import annotations

import os
import shlex
import socket
import threading
import time
from pathlib import Path

import boto3
import httpx
import pytest

from scrape_pipeline_local.stack import API_KEY, LocalStack
from scrape_pipeline_ops.cli import local
from tests.cli.conftest import Cli


def test_local_up_runs_the_pipeline_until_interrupted(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    # GIVEN `local up` whose wait for Ctrl-C is replaced by a user of the stack
    seen: dict[str, object] = {}

    def use_then_interrupt(stack: LocalStack) -> None:
        assert stack.simulator is not None and stack.resources is not None
        seen["threads"] = {t.name for t in threading.enumerate()}
        # a job submitted as a user would, then found in S3 without anyone stepping time
        job = httpx.post(
            f"{stack.simulator.base_url}/v1/extract",
            headers={"X-Api-Key": API_KEY},
            json={"url": "https://example.com/local-up", "processing_mode": "async"},
        ).json()
        s3 = boto3.client("s3")
        keys = {
            f"results/extract/{job['job_id']}/metadata.json",
            f"dead-letters/extract/{job['job_id']}.json",
        }
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "stored" not in seen:
            listed = s3.list_objects_v2(Bucket=stack.resources.bucket).get("Contents", [])
            if keys & {o["Key"] for o in listed}:
                seen["stored"] = True
            time.sleep(0.1)
        seen["env"] = os.environ.get("LEDGER_TABLE_NAME")
        raise KeyboardInterrupt  # Ctrl-C

    monkeypatch.setattr(local, "wait_for_interrupt", use_then_interrupt)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # WHEN it runs 50 times faster than real time
    result = cli("local", "up", "--seed", "5", "--time-scale", "50")
    # THEN the endpoints were printed, the background parts ran, and Ctrl-C stopped it cleanly
    assert result.code == 0, result.err
    assert {"sqs-poller", "scheduler"} <= seen["threads"]  # type: ignore[operator]
    assert seen.get("stored") is True
    for name in ("GEONODE_BASE_URL", "AWS_ENDPOINT_URL", "QUEUE_URL", "DLQ_URL", "RESULTS_BUCKET"):
        assert f"export {name}=" in result.out
    assert f"export GEONODE_SCRAPER_API_KEY={API_KEY}" in result.out
    assert "local stack stopped" in result.out
    assert seen["env"] and os.environ.get("LEDGER_TABLE_NAME") is None  # environment restored


def test_local_up_bad_time_scale_is_exit_2(cli: Cli):
    result = cli("local", "up", "--time-scale", "0")
    assert result.code == 2
    assert result.err.startswith("scrape-pipeline: error: --time-scale")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_local_up_fixed_ports_and_env_file(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    # GIVEN fixed ports for the front, the simulator and moto, and an env file to write
    front, sim, moto = _free_port(), _free_port(), _free_port()
    env_file = tmp_path / ".local.env"
    seen: dict[str, object] = {}

    def look_then_interrupt(stack: LocalStack) -> None:
        exported = dict(
            shlex.split(line.removeprefix("export "))[0].split("=", 1)
            for line in env_file.read_text().splitlines()
        )
        seen["exported"] = exported
        # the secret ids are names: stable across restarts, and Secrets Manager takes them
        boto3.client("secretsmanager").get_secret_value(SecretId=exported["WEBHOOK_SECRET_ID"])
        raise KeyboardInterrupt

    monkeypatch.setattr(local, "wait_for_interrupt", look_then_interrupt)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # WHEN the stack comes up
    result = cli(
        "local", "up", "--port", str(front), "--simulator-port", str(sim),
        "--moto-port", str(moto), "--env-file", str(env_file),
    )  # fmt: skip
    # THEN every address is on its fixed port, and the env file holds what was printed
    assert result.code == 0, result.err
    exported = seen["exported"]
    assert isinstance(exported, dict)
    assert exported["WEBHOOK_URL"] == f"http://127.0.0.1:{front}/v1/webhooks/geonode"
    assert exported["GEONODE_BASE_URL"] == f"http://127.0.0.1:{sim}"
    assert exported["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{moto}"
    assert exported["QUEUE_URL"].startswith(f"http://127.0.0.1:{moto}/")
    assert ":secret:" not in exported["WEBHOOK_SECRET_ID"]
    assert f"source {env_file}" in result.out


def test_local_up_bad_port_is_exit_2(cli: Cli):
    result = cli("local", "up", "--port", "70000")
    assert result.code == 2
    assert "a port must be between 0 and 65535" in result.err
