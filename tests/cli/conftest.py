"""Fixtures for the CLI: run ``main`` in-process against a real local stack, read what it printed.

The stack is shared by a module (starting one takes seconds). The suite's autouse fixture
clears the AWS environment before every test, so ``live`` sets the stack's back for each.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimConfig
from scrape_pipeline_local.stack import API_KEY, LocalStack
from scrape_pipeline_ops.cli.main import main

QUIET: dict[str, Any] = {
    "seed": 11,
    "rate_limit_per_s": 0,
    "retryable_failure_rate": 0.0,
    "permanent_failure_rate": 0.0,
    "webhook_jitter": 0.0,
}


@dataclass
class Result:
    """What one ``main`` call returned and printed."""

    code: int
    out: str
    err: str

    def records(self) -> list[dict[str, Any]]:
        """stdout as JSON lines."""
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def record(self) -> dict[str, Any]:
        """stdout as exactly one JSON line."""
        [only] = self.records()
        return only


Cli = Callable[..., Result]


def assert_one_error_line(result: Result, code: int, *needles: str) -> str:
    """A failure is one stderr line with the CLI's prefix, the right status, no traceback."""
    assert result.code == code, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("scrape-pipeline: error: "), lines[0]
    assert "Traceback" not in result.err + result.out
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    """``cli("status", "--json", clock=..., stdin="...")`` -> Result.

    Each test has its own run journal: none resumes another's run, none writes the user's.
    """
    monkeypatch.setenv("SCRAPE_PIPELINE_JOURNAL", str(tmp_path / "journal" / "runs.sqlite3"))

    def run(*argv: str, clock: Any = None, stdin: str | None = None) -> Result:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(list(argv), clock=clock)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def stack_environment(stack: LocalStack) -> dict[str, str]:
    """The variables a user of the local stack exports (``local up`` prints the same)."""
    assert stack.moto is not None and stack.resources is not None and stack.simulator is not None
    assert stack.front is not None
    return {
        "WEBHOOK_URL": stack.front.url("/webhooks/geonode"),
        "AWS_ENDPOINT_URL": stack.moto.endpoint,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        **stack.resources.environment(),
        "GEONODE_BASE_URL": stack.simulator.base_url,
        "GEONODE_SCRAPER_API_KEY": API_KEY,
    }


@contextlib.contextmanager
def quiet_stack(**sim: Any) -> Iterator[LocalStack]:
    """A started stack on ``QUIET``'s API changed by ``sim``, its handlers logging errors only."""
    stack = LocalStack(ManualClock(), SimConfig(**{**QUIET, **sim})).start()
    # The handlers run in this process and log to stdout: keep the CLI's output readable.
    levels = {name: module.logger.log_level for name, module in stack.handlers.items()}
    for module in stack.handlers.values():
        module.logger.setLevel("ERROR")
    try:
        yield stack
    finally:
        for name, module in stack.handlers.items():
            module.logger.setLevel(levels[name])
        stack.stop()


@pytest.fixture(scope="module")
def module_stack() -> Iterator[LocalStack]:
    with quiet_stack() as stack:
        yield stack


def use_stack(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> LocalStack:
    """``stack``'s environment set for this test, as a user of ``local up`` exports it."""
    from scrape_pipeline_local.moto_server import forget_cached_clients

    for name, value in stack_environment(stack).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DLQ_URL", raising=False)  # derived from the queue's redrive policy
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")  # no metric lines on stdout
    forget_cached_clients()
    return stack


@contextlib.contextmanager
def own_stack(**sim: Any) -> Iterator[LocalStack]:
    """A test's own started stack on ``QUIET``'s API changed by ``sim``, its environment set.

    The environment is restored before the stack stops: a stack puts back at its stop what it
    set at its start, so the other order would leave its variables to the next test.
    """
    stack = LocalStack(ManualClock(), SimConfig(**{**QUIET, **sim})).start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            yield use_stack(stack, patch)
    finally:
        stack.stop()


@pytest.fixture
def live(module_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> LocalStack:
    """The module's stack, with its environment set for this test."""
    return use_stack(module_stack, monkeypatch)
