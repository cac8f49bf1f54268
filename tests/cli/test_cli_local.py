"""``local up``: the whole pipeline on a real (sped-up) clock, with its background threads."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import boto3
import httpx
import pytest

from scrape_pipeline_local.shell_env import shell_lines
from scrape_pipeline_local.stack import API_KEY, LocalStack
from scrape_pipeline_ops.cli import local
from tests.cli.conftest import Cli, assert_one_error_line


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
        lines = env_file.read_text().splitlines()
        exported = dict(
            shlex.split(line.removeprefix("export "))[0].split("=", 1)
            for line in lines
            if line.startswith("export ")
        )
        seen["exported"] = exported
        seen["lines"] = lines
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
    # AND the file is the lines printed, the `sam` guard included
    assert seen["lines"] == shell_lines(exported)
    assert all(line in result.out for line in seen["lines"])


def test_local_up_bad_port_is_exit_2(cli: Cli):
    result = cli("local", "up", "--port", "70000")
    assert result.code == 2
    assert "a port must be between 0 and 65535" in result.err


@pytest.mark.parametrize("flag", ["--port", "--simulator-port", "--moto-port"])
def test_local_up_on_a_busy_port_is_one_line_and_exit_2(cli: Cli, flag: str):
    # GIVEN a port a server already listens on (another `local up`, say)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # WHEN `local up` is asked for it
        result = cli("local", "up", flag, str(port))
    # THEN it names the flag and the port in the CLI's one line, exit 2, and starts nothing
    assert_one_error_line(result, 2, f"{flag} {port}: 127.0.0.1:{port} is already in use")
    assert result.out == ""


def test_local_up_one_port_for_two_servers_is_exit_2(cli: Cli):
    port = str(_free_port())
    result = cli("local", "up", "--port", port, "--moto-port", port)
    assert_one_error_line(result, 2, "must differ")


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_local_up_sends_the_functions_output_to_its_log_not_the_terminal(tmp_path: Path):
    # GIVEN `local up` as a user starts it: its own process, its output on a terminal (a file
    # here), the reconciler's schedule 60 times faster than real time
    out, log = tmp_path / "terminal.out", tmp_path / "functions.log"
    command = [sys.executable, "-m", "scrape_pipeline_ops.cli.main", "local", "up"]
    with out.open("w") as terminal:
        process = subprocess.Popen(
            [*command, "--time-scale", "60", "--function-log", str(log)],
            stdout=terminal,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            _wait_for(lambda: "Ctrl-C stops" in out.read_text(), 90, "the endpoint list")
            # WHEN the functions have run (the reconciler logs and emits metrics each run)
            _wait_for(lambda: '"_aws"' in log.read_text(), 60, "the functions' EMF records")
            _wait_for(lambda: '"reconciled"' in log.read_text(), 30, "the reconciler's log line")
            process.send_signal(signal.SIGINT)  # Ctrl-C
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    shown = out.read_text()
    # THEN the terminal has the endpoints, where the logs are and what a restart keeps, and
    # none of the functions' log lines or metrics
    assert code == 0, shown
    assert f"function log  {log}" in shown
    assert f"# the functions' logs and metrics: {log}" in shown
    assert "a restart loses the ledger, queues, bucket, secrets and the simulator's jobs" in shown
    assert '"_aws"' not in shown and '"reconciled"' not in shown
    assert shown.rstrip().endswith("local stack stopped: its data is gone (a restart starts empty)")
