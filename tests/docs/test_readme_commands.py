"""The commands the README and docs/ show work as written.

Every ``make TARGET`` they name is a target of the Makefile, and every ``scrape-pipeline``
line of their ``bash`` blocks parses with the CLI's own parser. The local-stack session of
``docs/cli.md`` (``## The local stack as an operator``: one block for two shells) runs as
written: shell 1's command (``local up``) as a process of its own, stopped at the end with
SIGINT as Ctrl-C would; shell 2's lines in order in one ``bash`` with ``set -e`` (its ``&``
and ``wait`` as they are), in a fresh folder, the CLI of this checkout first on PATH and no
AWS credentials of the machine's. Each command's output is judged from outside: the tail's
events in its file, the results on disk, the audit's counts. About 40 s on an idle 2-core
machine (the stack's start and the jobs' own 1-20 s).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "cli.md"
HEADING = "## The local stack as an operator"
SHOWN = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
MAKE = re.compile(r"(?:^|[\s`(])make (?:-s )?([a-z][\w-]*)")
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")
SHELL = re.compile(r"^# shell (\d)\b")
MARK = "@@readme-command@@"
STARTED_WITHIN_S = 120.0
STOPPED_WITHIN_S = 30.0
SHELL_TWO_WITHIN_S = 180.0

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Session:
    """The block's commands: shell 1's (the stack) and shell 2's, in order, comments kept."""

    stack: str
    lines: list[str]


def readme_session() -> Session:
    """The first ``bash`` block under the heading, split by its ``# shell N`` comments."""
    text = PAGE.read_text()
    assert HEADING in text, f"docs/cli.md has no {HEADING!r}"
    section = text.split(HEADING, 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, f"no bash block under {HEADING!r}"
    shells: dict[str, list[str]] = {"1": [], "2": []}
    current = ""
    for line in match.group(1).splitlines():
        found = SHELL.match(line)
        if found:
            current = found.group(1)
        elif line.strip() and not line.lstrip().startswith("#"):
            assert current, f"a command before any '# shell N': {line!r}"
            shells[current].append(line)
    (stack,) = shells["1"]  # one command runs the stack; the block's end is its Ctrl-C
    return Session(stack=stack, lines=shells["2"])


def _command(line: str) -> str:
    """The line without its trailing comment (the key its output is filed under)."""
    return re.sub(r"\s+#\s.*$", "", line).strip()


def _environment(home: Path) -> dict[str, str]:
    """A shell of this checkout's CLI and nothing of the machine's AWS or Geonode settings."""
    bin_dir = Path(sys.executable).parent
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(home / "state"),
        "POWERTOOLS_METRICS_NAMESPACE": "ScrapePipelineReadme",
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path


@pytest.fixture
def stack(folder: Path) -> Iterator[subprocess.Popen[str]]:
    """Shell 1: the page's ``local up``, until the env file it names exists."""
    session = readme_session()
    process = subprocess.Popen(
        ["bash", "-c", f"exec {session.stack}"],  # exec: the SIGINT reaches the CLI itself
        cwd=folder,
        env=_environment(folder / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    env_file = folder / re.search(r"--env-file\s+(\S+)", session.stack).group(1)  # type: ignore[union-attr]
    deadline = time.monotonic() + STARTED_WITHIN_S
    try:
        while not (env_file.exists() and env_file.stat().st_size):
            if process.poll() is not None or time.monotonic() > deadline:
                out, err = (
                    process.communicate(timeout=10) if process.poll() is not None else ("", "")
                )
                pytest.fail(
                    f"`{session.stack}` did not start: rc {process.returncode}\n{out}\n{err}"
                )
            time.sleep(0.2)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def _run_shell_two(lines: list[str], folder: Path) -> dict[str, tuple[str, str]]:
    """Shell 2's lines in one bash; each command's stdout and stderr, by command."""
    script = ["set -e"]
    for index, line in enumerate(lines):
        script += [f"echo {MARK}{index}", f"echo {MARK}{index} >&2", line]
    try:
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            check=False,  # judged below, with the command it stopped at
            cwd=folder,
            env=_environment(folder / "home"),
            capture_output=True,
            text=True,
            timeout=SHELL_TWO_WITHIN_S,
        )
    except subprocess.TimeoutExpired as late:
        reached = re.findall(rf"{MARK}(\d+)", (late.stdout or b"").decode())
        at = lines[int(reached[-1])] if reached else lines[0]
        pytest.fail(f"shell 2 still at `{at}` after {SHELL_TWO_WITHIN_S:g} s")
    outs = re.split(rf"{MARK}(\d+)\n", done.stdout)
    errs = re.split(rf"{MARK}(\d+)\n", done.stderr)
    by_index_out = dict(zip(outs[1::2], outs[2::2], strict=True))
    by_index_err = dict(zip(errs[1::2], errs[2::2], strict=True))
    assert done.returncode == 0, (
        f"shell 2 stopped (rc {done.returncode}) at: "
        f"{lines[int(outs[-2])] if len(outs) > 1 else lines[0]}\n{done.stdout}\n{done.stderr}"
    )
    assert len(by_index_out) == len(lines)
    return {
        _command(line): (by_index_out[str(i)], by_index_err.get(str(i), ""))
        for i, line in enumerate(lines)
    }


def _output(outputs: dict[str, tuple[str, str]], start: str) -> str:
    """The stdout of the one command that starts with ``start``."""
    (found,) = [out for command, (out, _) in outputs.items() if command.startswith(start)]
    return found


def test_the_docs_local_stack_session_runs_as_written(
    stack: subprocess.Popen[str], folder: Path
) -> None:
    # GIVEN the page's shell 1 running the stack
    session = readme_session()
    # WHEN shell 2's lines run as written
    outputs = _run_shell_two(session.lines, folder)

    # THEN each command did what the block's comments say, judged from its output and files
    assert "ledger rows by state" in _output(outputs, "scrape-pipeline status")
    submitted = _output(outputs, "scrape-pipeline submit")
    assert len(re.findall(r"\tqueued\t", submitted)) == 2, submitted
    polled = _output(outputs, "scrape-pipeline poll")
    assert len(re.findall(r"\tcompleted\t", polled)) == 2, polled
    results = sorted(p.name for p in (folder / "results").glob("*/content.md"))
    assert len(results) == 2
    listed = _output(outputs, "scrape-pipeline runs list")
    assert re.search(r"^first\s+async\s+2\s", listed, re.M), listed
    shown = _output(outputs, "scrape-pipeline runs show")
    assert re.search(r"^complete\s+True$", shown, re.M), shown
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    assert sorted(e["detail"]["url"] for e in events) == [
        "https://example.com/a",
        "https://example.com/b",
    ]
    assert {e["detail-type"] for e in events} == {"Job Stored"}
    audit = _output(outputs, "scrape-pipeline audit")
    for name, value in (("jobs", 2), ("stored", 2), ("missing", 0), ("doubled", 0)):
        assert re.search(rf"^{name}\s+{value}$", audit, re.M), (name, audit)
    found = _output(outputs, "scrape-pipeline results get")
    assert "results/extract/" in found and "content.md" in found, found
    (_, off_err) = outputs["local_stack_off"]
    assert "AWS tools reach AWS again" in off_err

    # AND shell 1's Ctrl-C stops the stack, saying its data is gone
    stack.send_signal(signal.SIGINT)
    out, err = stack.communicate(timeout=STOPPED_WITHIN_S)
    assert stack.returncode == 0, err
    assert "its data is gone" in out + err


def _makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {name for line in re.findall(r"^([\w .-]+):(?!=)", text, re.M) for name in line.split()}


def _shown_code(page: Path) -> list[str]:
    """The page's ``bash`` blocks' lines and its code spans outside code blocks."""
    text = page.read_text()
    lines = [line for block in BASH_BLOCK.findall(text) for line in block.splitlines()]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return lines + CODE_SPAN.findall(prose)


def test_every_make_target_shown_is_in_the_makefile() -> None:
    # GIVEN every `make TARGET` the README and docs/ show, in blocks and code spans
    shown = {
        (page.relative_to(REPO).as_posix(), target)
        for page in SHOWN
        for code in _shown_code(page)
        for target in MAKE.findall(code)
    }
    assert {target for _, target in shown} >= {"demo", "test", "docs"}
    # THEN each is a target a reader can run
    missing = sorted(f"{page}: make {t}" for page, t in shown if t not in _makefile_targets())
    assert not missing, "\n".join(missing)


def _cli_lines(page: Path) -> list[list[str]]:
    """Each ``scrape-pipeline`` command of the page's ``bash`` blocks, as its argv."""
    found = []
    for block in BASH_BLOCK.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"\w+=.*", words[0]):
                words = words[1:]  # VAR=value before the command
            if words[:1] != ["scrape-pipeline"]:
                continue
            cut = [i for i, w in enumerate(words) if w in {"&", "&&", "|", ">", ";"}]
            found.append(words[1 : cut[0] if cut else None])
    return found


def test_every_cli_command_shown_parses() -> None:
    from scrape_pipeline_ops.cli.config import UsageError
    from scrape_pipeline_ops.cli.main import build_parser

    # GIVEN every scrape-pipeline line of the README's and docs' bash blocks
    shown = [(page, argv) for page in SHOWN for argv in _cli_lines(page)]
    assert len(shown) >= 15, shown
    # THEN the CLI's parser takes each as written (a renamed command or option fails here)
    wrong = []
    for page, argv in shown:
        try:
            args, extra = build_parser().parse_known_args(argv)
        except (SystemExit, UsageError):
            extra, args = ["(refused)"], None
        if extra and not getattr(args, "passthrough", False):  # as the CLI's main refuses them
            wrong.append(f"{page.relative_to(REPO)}: scrape-pipeline {shlex.join(argv)}")
    assert not wrong, "\n".join(wrong)
