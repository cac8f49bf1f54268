"""The CLI without a stack: its tree, its one-line errors, its printing, its configuration."""

from __future__ import annotations

import ast
import io
import json
import os
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from scrape_pipeline_ops.cli.main import main
from scrape_pipeline_ops.cli.output import Printer, plain_table
from tests.cli.conftest import Cli, assert_one_error_line

ROOT = Path(__file__).resolve().parents[2]
CLI_PACKAGE = ROOT / "scrape_pipeline_ops" / "cli"
SCRIPT = Path(sys.executable).parent / "scrape-pipeline"

COMMANDS = [
    [],
    ["submit"],
    ["poll"],
    ["webhooks"],
    ["webhooks", "setup"],
    ["webhooks", "register"],
    ["webhooks", "list"],
    ["webhooks", "delete"],
    ["webhooks", "enable"],
    ["webhooks", "disable"],
    ["webhooks", "rotate-secret"],
    ["secrets"],
    ["secrets", "put-api-key"],
    ["doctor"],
    ["deliveries"],
    ["deliveries", "list"],
    ["deliveries", "replay"],
    ["reconcile"],
    ["status"],
    ["dlq"],
    ["dlq", "inspect"],
    ["dlq", "redrive"],
    ["local"],
    ["local", "up"],
]


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEONODE_SCRAPER_API_KEY", "GEONODE_API_KEY_SECRET_ID", "GEONODE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


# -- the tree ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "top")
def test_help_every_command_exits_0(cli: Cli, path: list[str]):
    result = cli(*path, "--help")
    assert result.code == 0
    assert result.out.startswith("usage: scrape-pipeline")
    assert result.err == ""


def test_main_without_command_is_usage_error(cli: Cli):
    assert_one_error_line(cli(), 2, "COMMAND")


def test_main_unknown_option_is_usage_error(cli: Cli):
    assert_one_error_line(cli("status", "--nope"), 2, "--nope")


def test_main_global_options_after_the_command(cli: Cli, tmp_path: Path):
    # --json and --api-key are accepted after the command name too
    missing = tmp_path / "missing.txt"
    result = cli("submit", str(missing), "--json", "--api-key", "k" * 12)
    assert_one_error_line(result, 2, "missing.txt")


# -- usage errors --------------------------------------------------------------------------


def test_submit_bad_mode_is_exit_2(cli: Cli):
    assert_one_error_line(cli("submit", "--mode", "later"), 2, "later")


def test_submit_bad_file_path_is_exit_2(cli: Cli, tmp_path: Path):
    result = cli("--api-key", "key-1234", "submit", str(tmp_path / "nope.txt"))
    assert_one_error_line(result, 2, "nope.txt")


def test_submit_not_a_url_is_exit_2(cli: Cli):
    result = cli("--api-key", "key-1234", "submit", stdin="example.com/no-scheme\n")
    assert_one_error_line(result, 2, "not an http(s) URL")


def test_submit_empty_input_is_exit_2(cli: Cli):
    assert_one_error_line(cli("submit", stdin="# only a comment\n\n"), 2, "no URLs")


def test_submit_max_pages_outside_crawl_is_exit_2(cli: Cli):
    result = cli("submit", "--max-pages", "3", stdin="https://example.com\n")
    assert_one_error_line(result, 2, "--max-pages")


def test_submit_unknown_format_is_exit_2(cli: Cli):
    result = cli("submit", "--formats", "markdown,pdf", stdin="https://example.com\n")
    assert_one_error_line(result, 2, "--formats")


def test_submit_missing_api_key_is_exit_2(cli: Cli):
    result = cli("submit", stdin="https://example.com\n")
    assert_one_error_line(result, 2, "no API key")


def test_poll_without_ids_is_exit_2(cli: Cli):
    assert_one_error_line(cli("poll", stdin=""), 2, "no job ids")


def test_poll_rejects_batch_lines_and_path_like_ids(cli: Cli):
    batch = json.dumps({"job_id": "abc", "kind": "batch"})
    assert_one_error_line(cli("poll", "--from", "-", stdin=batch), 2, "batch")
    assert_one_error_line(cli("poll", "../etc"), 2, "not a job id")


def test_poll_rejects_a_malformed_id_at_once_before_any_request(cli: Cli):
    # GIVEN no API at all: a request would fail with exit 1, not 2
    # WHEN an id is not a UUID THEN it is one line, exit 2, naming the id and the way out
    result = cli("--api-key", "key-1234", "--base-url", "http://127.0.0.1:9", "poll", "job-1")
    assert_one_error_line(result, 2, "not a job id", "--any-id-format", "job-1")


def test_poll_any_id_format_lets_other_ids_through(cli: Cli):
    # the id passes the check, so the failure is the unreachable API's (exit 1)
    result = cli(
        "--api-key", "key-1234", "--base-url", "http://127.0.0.1:9",
        "poll", "job-1", "--any-id-format", "--max-wait", "1",
    )  # fmt: skip
    assert_one_error_line(result, 1, "cannot reach 127.0.0.1:9")


def test_webhooks_register_needs_a_place_for_the_secret(cli: Cli):
    result = cli("--api-key", "key-1234", "webhooks", "register", "https://h/x", "batch_completed")
    assert_one_error_line(result, 2, "--store-secret")


def test_webhooks_register_bad_event_type_is_exit_2(cli: Cli):
    result = cli("webhooks", "register", "https://h/x", "job_done", "--show-secret")
    assert_one_error_line(result, 2, "job_done")


def test_bad_base_url_is_exit_2_and_hides_the_key(cli: Cli):
    result = cli("--api-key", "sk-very-secret-1", "--base-url", "ftp://x", "webhooks", "list")
    line = assert_one_error_line(result, 2, "--base-url")
    assert "sk-very-secret-1" not in line


def test_unrecognized_argument_never_echoes_the_api_key(cli: Cli):
    result = cli("--api-key=sk-very-secret-2", "status", "sk-very-secret-2")
    line = assert_one_error_line(result, 2, "unrecognized")
    assert "sk-very-secret-2" not in line


def test_status_without_resources_is_exit_2(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    for name in ("LEDGER_TABLE_NAME", "QUEUE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert_one_error_line(cli("status"), 2, "LEDGER_TABLE_NAME", "QUEUE_URL")


def test_unreachable_api_is_exit_1_at_once_naming_host_and_cause(cli: Cli):
    # GIVEN an API address nothing listens on, and the default retry settings
    started = time.monotonic()
    # WHEN a command calls it
    result = cli("--api-key", "key-1234", "--base-url", "http://127.0.0.1:9", "webhooks", "list")
    # THEN one line says where and why, within seconds (a refused connection is tried twice)
    line = assert_one_error_line(result, 1, "Geonode API", "cannot reach 127.0.0.1:9")
    assert line.endswith("cannot reach 127.0.0.1:9: connection refused (ConnectError)")
    assert "key-1234" not in line
    assert time.monotonic() - started < 5


def test_keyboard_interrupt_is_exit_130(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    from scrape_pipeline_ops.cli import ops

    def interrupted(ctx: object, args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(ops, "status", interrupted)
    assert_one_error_line(cli("status"), 130, "interrupted")


def test_unexpected_error_is_one_line_exit_1(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    from scrape_pipeline_ops.cli import ops

    def broken(ctx: object, args: object) -> int:
        raise RuntimeError("bug")

    monkeypatch.setattr(ops, "status", broken)
    assert_one_error_line(cli("status"), 1, "internal error: RuntimeError: bug")
    monkeypatch.setenv("SCRAPE_PIPELINE_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="bug"):
        main(["status"])


def _failing_status(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    from scrape_pipeline_ops.cli import ops

    def failing(ctx: object, args: object) -> int:
        raise exc

    monkeypatch.setattr(ops, "status", failing)


def test_aws_error_a_command_lets_through_is_named_by_aws_errors(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN a command whose own boto3 call fails (status scans the table itself)
    from botocore.exceptions import ClientError

    error = ClientError(
        {"Error": {"Code": "ResourceNotFoundException", "Message": "no such\ntable"}}, "Scan"
    )
    _failing_status(monkeypatch, error)
    # THEN one line, exit 1, as aws_errors.translate words it
    line = assert_one_error_line(cli("status"), 1)
    assert line.endswith("AWS Scan failed: ResourceNotFoundException: no such table")


def test_aws_without_region_is_exit_2(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    from botocore.exceptions import NoRegionError

    _failing_status(monkeypatch, NoRegionError())
    assert_one_error_line(cli("status"), 2, "AWS configuration")


def test_runtime_errors_are_one_line_by_class(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    # GIVEN errors of the runtime's tree reaching the top: a bad setting, a ledger error
    from scrape_pipeline.config.settings import SettingsError
    from scrape_pipeline.ledger.table import LedgerError

    bad = SettingsError("LEDGER_TTL_DAYS must be an integer, got '2.5'", names=("X",))
    _failing_status(monkeypatch, bad)
    assert_one_error_line(cli("status"), 2, "LEDGER_TTL_DAYS must be an integer")
    _failing_status(monkeypatch, LedgerError("the ledger refused"))
    line = assert_one_error_line(cli("status"), 1, "the ledger refused")
    assert "internal error" not in line


# -- local demo ----------------------------------------------------------------------------


def test_local_demo_missing_is_exit_2(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "scrape_pipeline_local.demo", None)
    assert_one_error_line(cli("local", "demo"), 2, "scrape_pipeline_local.demo")


def test_local_demo_passes_its_arguments_through(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setitem(
        sys.modules, "scrape_pipeline_local.demo", types.SimpleNamespace(main=fake_main)
    )
    result = cli("local", "demo", "--jobs", "5", "--json", "--help")
    assert result.code == 3
    assert seen == [["--jobs", "5", "--json", "--help"]]


# -- extras: what a command needs and the version -------------------------------------------


@pytest.mark.parametrize("action", ["up", "demo"])
def test_local_without_the_local_extra_names_it_exit_2(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, action: str
):
    # GIVEN an install without the `local` extra (fastapi and uvicorn not importable)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    # WHEN a local command runs
    line = assert_one_error_line(cli("local", action), 2, "fastapi, uvicorn not installed")
    # THEN the one line says which extra to install
    assert line.endswith("pip install 'scrape-pipeline[local]'")
    assert "scrape-pipeline local needs the local stack" in line


def test_local_outside_a_checkout_says_so_exit_2(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    from scrape_pipeline_local import extra

    # GIVEN the extra installed, but no template.yaml nor functions/ beside the package
    monkeypatch.setattr(extra, "CHECKOUT", tmp_path)
    # THEN `local up` says it runs from a checkout
    assert_one_error_line(cli("local", "up"), 2, "checkout of the repository", "template.yaml")


def test_local_outside_a_checkout_without_the_extra_says_both_at_once_exit_2(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    from scrape_pipeline_local import extra

    # GIVEN an installed wheel: neither the `local` extra nor a checkout beside the package
    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.setattr(extra, "CHECKOUT", tmp_path)
    # WHEN `local up` runs
    line = assert_one_error_line(
        cli("local", "up"), 2, "checkout of the repository", "fastapi not installed"
    )
    # THEN the one line names the install that gives both, not only the extra
    assert line.endswith("run it there, installed with pip install -e '.[local]'"), line
    assert "scrape-pipeline[local]" not in line


def test_geonode_sim_without_the_local_extra_names_it_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    from scrape_pipeline_local.extra import geonode_sim

    monkeypatch.setitem(sys.modules, "fastapi", None)
    assert geonode_sim() == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "geonode-sim needs the local stack (fastapi not installed): "
        "pip install 'scrape-pipeline[local]'"
    ]


def test_version_is_the_installed_distribution_s(cli: Cli):
    from importlib import metadata

    result = cli("--version")
    assert result.code == 0 and result.err == ""
    assert result.out == f"scrape-pipeline {metadata.version('scrape-pipeline')}\n"


# -- configuration from a CloudFormation stack -----------------------------------------------


def test_stack_name_reads_outputs_and_exports_them(cli: Cli, monkeypatch: pytest.MonkeyPatch):
    import boto3
    from moto import mock_aws

    names = (
        "LEDGER_TABLE_NAME", "QUEUE_URL", "DLQ_URL", "RESULTS_BUCKET", "WEBHOOK_SECRET_ID",
        "WEBHOOK_URL",
    )  # fmt: skip
    for name in names:
        monkeypatch.setenv(name, "stale")  # restored after the test
    template = {
        "Resources": {
            "LedgerTable": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "TableName": "cfn-ledger",
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "BillingMode": "PAY_PER_REQUEST",
                },
            },
            "JobQueue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "cfn-jobs"}},
            "JobDeadLetterQueue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"QueueName": "cfn-dlq"},
            },
        },
        "Outputs": {
            "LedgerTableName": {"Value": {"Ref": "LedgerTable"}},
            "JobQueueUrl": {"Value": {"Ref": "JobQueue"}},
            "JobDeadLetterQueueUrl": {"Value": {"Ref": "JobDeadLetterQueue"}},
            "ResultsBucketName": {"Value": "cfn-results"},
            "WebhookSecretArn": {"Value": "arn:aws:secretsmanager:us-east-1:1:secret:x"},
            "WebhookUrl": {"Value": "https://api.example/v1/webhooks/geonode"},
        },
    }
    with mock_aws():
        boto3.client("cloudformation").create_stack(
            StackName="pipe", TemplateBody=json.dumps(template)
        )
        dlq = boto3.client("sqs").get_queue_url(QueueName="cfn-dlq")["QueueUrl"]
        boto3.client("sqs").send_message(QueueUrl=dlq, MessageBody="{}")
        result = cli("--stack-name", "pipe", "status", "--json")
        missing = cli("--stack-name", "nope", "status")
    assert result.code == 0, result.err
    status = result.record()
    assert status["ledger"]["jobs"] == 0
    assert status["dlq"]["visible"] == 1
    assert os.environ["LEDGER_TABLE_NAME"] == "cfn-ledger"
    assert os.environ["RESULTS_BUCKET"] == "cfn-results"
    assert os.environ["DLQ_URL"] == dlq
    assert os.environ["WEBHOOK_URL"] == "https://api.example/v1/webhooks/geonode"
    assert_one_error_line(missing, 1, "DescribeStacks")


def test_status_against_an_unreachable_aws_endpoint_names_the_host_and_the_cause(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN an AWS endpoint nobody listens on (a port bound, then closed: refused at once)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setenv("LEDGER_TABLE_NAME", "ledger")
    monkeypatch.setenv("QUEUE_URL", f"http://127.0.0.1:{port}/000000000000/jobs")
    # WHEN the operator asks for the pipeline's state
    result = cli("status")
    # THEN one line, exit 1, names the endpoint's host and why it failed, no traceback
    assert_one_error_line(
        result, 1, "EndpointConnectionError", f"cannot reach 127.0.0.1:{port}", "connection refused"
    )


# -- printing ------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_output_plain_table_aligns_columns():
    lines = plain_table([{"id": "a", "n": 10}, {"id": "bbb", "n": None}], ["id", "n"])
    assert lines == ["ID   N", "a    10", "bbb  -"]


def test_output_json_mode_prints_every_field_as_json_lines():
    out = io.StringIO()
    Printer(json_mode=True, stdout=out).table([{"id": "a", "extra": [1]}], ["id"])
    assert json.loads(out.getvalue()) == {"id": "a", "extra": [1]}


def test_output_rich_table_on_a_terminal():
    out = _Terminal()
    Printer(stdout=out).table([{"id": "job-1", "status": "done"}], ["id", "status"], title="t")
    text = out.getvalue()
    assert "job-1" in text
    assert any(line in text for line in "━─┃│")  # drawn by rich, not the plain fallback


def test_output_plain_on_a_terminal_without_rich(monkeypatch: pytest.MonkeyPatch):
    for name in ("rich", "rich.console", "rich.table"):
        monkeypatch.setitem(sys.modules, name, None)
    out = _Terminal()
    Printer(stdout=out).table([{"id": "job-1", "status": "done"}], ["id", "status"])
    assert out.getvalue().splitlines() == ["ID     STATUS", "job-1  done"]


def test_output_error_is_one_line():
    err = io.StringIO()
    Printer(stderr=err).error("first\nsecond   third")
    assert err.getvalue() == "scrape-pipeline: error: first second third\n"


# -- packaging and cold start ----------------------------------------------------------------


def test_cli_modules_import_rich_and_the_local_stack_lazily():
    # (httpx itself imports rich when it is installed, for its own CLI: only ours is checked)
    eager = []
    for path in CLI_PACKAGE.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            eager += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] in ("rich", "scrape_pipeline_local")
            ]
    assert eager == []


def test_cli_runs_without_rich_and_loads_no_local_stack():
    code = (
        "import sys; sys.modules['rich'] = None\n"
        "from scrape_pipeline_ops.cli.main import main\n"
        "code = main(['status', '--help'])\n"
        "local = [m for m in sys.modules if m.startswith('scrape_pipeline_local')]\n"
        "assert not local, f'local stack loaded: {local}'\n"
        "sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "usage: scrape-pipeline status" in done.stdout


def test_installed_script_help_and_missing_key():
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEONODE_")}
    helped = subprocess.run(
        [str(SCRIPT), "--help"], check=False, capture_output=True, text=True, env=env, timeout=60
    )
    assert helped.returncode == 0
    assert "webhooks" in helped.stdout and helped.stderr == ""
    failed = subprocess.run(
        [str(SCRIPT), "webhooks", "list"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [
        "scrape-pipeline: error: no API key: set GEONODE_SCRAPER_API_KEY, or pass --api-key "
        "or --api-key-secret-id"
    ]
    assert failed.stdout == ""
