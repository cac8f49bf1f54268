"""The env file `local up` writes, sourced by a real bash: `sam deploy` is refused there, with
one line, and never reaches the real `sam`; every other sam command does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scrape_pipeline_local.shell_env import GUARDED_SAM_COMMANDS, OFF_FUNCTION, shell_lines

VARIABLES = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",  # moto's dummy credentials # nosec B105
    "QUEUE_URL": "http://127.0.0.1:5000/123456789012/scrape pipeline's queue",  # quoting
}
BASH = shutil.which("bash")


def sourced(tmp_path: Path, commands: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``commands`` in a bash that sourced the env file, with a fake ``sam`` first on PATH
    that records each call (its arguments and the endpoint it saw); the run and the calls."""
    env_file = tmp_path / ".local.env"
    env_file.write_text("\n".join(shell_lines(VARIABLES)) + "\n")
    bin_dir, calls = tmp_path / "bin", tmp_path / "sam-calls"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "sam"
    fake.write_text(f'#!/bin/sh\necho "$* endpoint=${{AWS_ENDPOINT_URL:-none}}" >> {calls}\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    assert BASH is not None
    run = subprocess.run(
        [BASH, "-c", f"source {env_file}\n{commands}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return run, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("command", GUARDED_SAM_COMMANDS)
def test_sam_that_changes_a_stack_is_refused_while_the_file_is_sourced(
    tmp_path: Path, command: str
):
    # WHEN `sam deploy` (sync, delete) runs in a shell that sourced the env file
    run, calls = sourced(tmp_path, f"sam {command} --stack-name scrape-pipeline; echo rc=$?")
    # THEN the real sam never ran, the shell saw exit 2, and one line said why and what to do
    assert calls == []
    assert run.stdout == "rc=2\n"
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"sam {command}: refused: ")
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:5000" in lines[0]
    assert OFF_FUNCTION in lines[0]


def test_other_sam_commands_and_the_variables_pass_through(tmp_path: Path):
    # WHEN a harmless sam command runs there, and the shell reads the variables
    run, calls = sourced(tmp_path, 'sam build --use-container; echo "$QUEUE_URL"')
    # THEN the real sam got it with its arguments, and every value is exported as given
    assert calls == ["build --use-container endpoint=http://127.0.0.1:5000"]
    assert run.stdout == f"{VARIABLES['QUEUE_URL']}\n"
    assert run.returncode == 0, run.stderr


def test_local_stack_off_unsets_the_variables_and_the_guard(tmp_path: Path):
    # WHEN the shell runs local_stack_off, then sam deploy
    run, calls = sourced(tmp_path, f"{OFF_FUNCTION}; sam deploy; echo rc=$?")
    # THEN the real sam ran, without the local endpoint
    assert calls == ["deploy endpoint=none"]
    assert run.stdout == "rc=0\n"
    assert "AWS tools reach AWS again" in run.stderr
