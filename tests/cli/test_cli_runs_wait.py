"""``runs show --wait``: the run read again until complete, on an injected clock (no real sleep)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from scrape_pipeline_ops.cli.runs import WAIT_STEP_SECONDS
from tests.cli.conftest import Cli, assert_one_error_line
from tests.cli.test_cli_runs import _error_line, _file, _once_each, clock, sim
from tests.cli.test_cli_runs_commands import _name

__all__ = ["clock", "sim"]


class SleepHook(ManualClock):
    """A manual clock that runs ``on_sleep`` at its first sleep (what happens meanwhile)."""

    def __init__(self, start: float, on_sleep: Callable[[], object]) -> None:
        super().__init__(start)
        self._on_sleep: Callable[[], object] | None = on_sleep

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)  # recorded in ``sleeps``
        hook, self._on_sleep = self._on_sleep, None
        if hook is not None:
            hook()


def test_runs_show_wait_returns_once_the_run_completes_meanwhile(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN a run of two URLs whose jobs have not settled yet
    path, urls = _file(tmp_path, "wait", 2)
    name = _name(cli("submit", str(path), "--json", clock=clock))
    # WHEN runs show --wait runs and poll follows the run during its first sleep
    waiting = SleepHook(clock.time(), lambda: cli("poll", "--run", name, "--json", clock=clock))
    shown = cli("runs", "show", name, "--wait", "60", "--json", clock=waiting)
    # THEN it read again after one step and exits 0 with the complete run
    assert shown.code == 0, shown.err
    assert shown.record()["complete"] is True and shown.record()["settled"] == 2
    assert waiting.sleeps == [WAIT_STEP_SECONDS]
    _once_each(sim, urls)


def test_runs_show_wait_gives_up_at_its_deadline_with_the_open_run_named(
    sim: SimulatorServer, cli: Cli, clock: ManualClock, tmp_path: Path
):
    # GIVEN a run whose jobs nobody follows (no stack, no poll)
    path, _ = _file(tmp_path, "late", 2)
    name = _name(cli("submit", str(path), "--json", clock=clock))
    # WHEN runs show waits 5 s for it
    waiting = SleepHook(clock.time(), lambda: None)
    shown = cli("runs", "show", name, "--wait", "5", "--json", clock=waiting)
    # THEN it slept no further than its deadline and exits 1, the jobs named
    assert sum(waiting.sleeps) == 5 and max(waiting.sleeps) <= WAIT_STEP_SECONDS
    _error_line(shown, f"run {name} is not complete", "2 job(s) not settled")


def test_runs_show_wait_out_of_range_is_one_line(cli: Cli):
    assert_one_error_line(cli("runs", "show", "any", "--wait", "-1"), 2, "--wait takes 0 to 3600")
